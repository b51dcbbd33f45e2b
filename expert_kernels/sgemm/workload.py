"""sgemm: fp32 C = alpha * A @ B + beta * C, row-major, any M, N, K.

Launcher: launch(const float* A, const float* B, float* C, float alpha, float beta, int M, int N,
int K, cudaStream_t). A is (M, K), B is (K, N), C is (M, N) and read and written (inout).
The reference computes in float64 and rounds once to float32. Tolerance: relative Frobenius
error <= 1e-5 (a K-long fp32 dot product carries about eps * sqrt(K) of relative rounding
error whatever the summation order: about 4e-6 at K = 4096 for a sequential sum; elementwise
checks fail on the entries near zero that every GEMM has).
"""

from __future__ import annotations

from collections.abc import Mapping

import torch

from klineage import Scalar, Tensor, Tolerance, Workload

ALPHA = 1.5
BETA = -0.75


def reference(A: torch.Tensor, B: torch.Tensor, C: torch.Tensor, alpha: float, beta: float,
              M: int, N: int, K: int) -> torch.Tensor:
    return (alpha * (A.double() @ B.double()) + beta * C.double()).to(torch.float32)


def vendor(A: torch.Tensor, B: torch.Tensor, C: torch.Tensor, alpha: float, beta: float,
           M: int, N: int, K: int) -> torch.Tensor:
    # cuBLAS SGEMM proper: TF32 tensor cores off
    torch.backends.cuda.matmul.allow_tf32 = False
    return C.addmm_(A, B, beta=beta, alpha=alpha)


def flops(b: Mapping[str, int]) -> float:
    return 2.0 * b["M"] * b["N"] * b["K"]


WORKLOAD = Workload(
    name="sgemm",
    args=[
        Tensor("A", ("M", "K"), "float32", "in"),
        Tensor("B", ("K", "N"), "float32", "in"),
        Tensor("C", ("M", "N"), "float32", "inout"),
        Scalar("alpha", "float32", value=ALPHA),
        Scalar("beta", "float32", value=BETA),
        Scalar("M"),
        Scalar("N"),
        Scalar("K"),
    ],
    reference=reference,
    shapes={
        "test": [
            {"M": 67, "N": 33, "K": 129},     # odd everything: scalar path, every tail
            {"M": 256, "N": 384, "K": 512},   # whole tiles, 128-bit path
            {"M": 300, "N": 260, "K": 100},   # 128-bit path with M, N, K tails
            {"M": 129, "N": 255, "K": 63},    # scalar path, large grid
            {"M": 1, "N": 1000, "K": 17},     # one row
            {"M": 1000, "N": 8, "K": 1024},   # skinny, small-tile config
            {"M": 1024, "N": 1024, "K": 1024},  # many tiles
            {"M": 2100, "N": 2052, "K": 300},   # 128 x 128 tiles (>= 2 per SM), 128-bit path, tails
            {"M": 2049, "N": 2051, "K": 77},    # 128 x 128 tiles, scalar path, tails
        ],
        "emu": [
            {"M": 33, "N": 20, "K": 17},
            {"M": 64, "N": 64, "K": 64},
            {"M": 40, "N": 36, "K": 44},
        ],
        "bench": [
            {"M": 4096, "N": 4096, "K": 4096},
            {"M": 8192, "N": 1024, "K": 8192},
        ],
    },
    tolerances={"float32": Tolerance(0.0, 1e-5, "frobenius")},
    description="fp32 GEMM C = alpha A B + beta C, row-major",
    vendor=vendor,
    flops=flops,
)
