"""gemm_bf16: C = A @ B with bf16 A (M, K) and B (K, N), fp32 accumulation, bf16 C (M, N),
row-major.

Launcher: launch(const __nv_bfloat16* A, const __nv_bfloat16* B, __nv_bfloat16* C, int M, int N,
int K, cudaStream_t). Precondition: M, N and K are multiples of 64 (`divisible_by`).
The reference computes in float64 from the bf16 inputs and is compared unrounded (fp32):
relative Frobenius error <= 1e-2 (the bf16 rounding of C alone is about 2e-3).
"""

from __future__ import annotations

from collections.abc import Mapping

import torch

from klineage import Scalar, Tensor, Tolerance, Workload


def reference(A: torch.Tensor, B: torch.Tensor, M: int, N: int, K: int) -> torch.Tensor:
    return (A.double() @ B.double()).to(torch.float32)


def vendor(A: torch.Tensor, B: torch.Tensor, M: int, N: int, K: int) -> torch.Tensor:
    return torch.matmul(A, B)  # cuBLAS bf16 GEMM


def flops(b: Mapping[str, int]) -> float:
    return 2.0 * b["M"] * b["N"] * b["K"]


WORKLOAD = Workload(
    name="gemm_bf16",
    args=[
        Tensor("A", ("M", "K"), "bfloat16", "in"),
        Tensor("B", ("K", "N"), "bfloat16", "in"),
        Tensor("C", ("M", "N"), "bfloat16", "out"),
        Scalar("M"),
        Scalar("N"),
        Scalar("K"),
    ],
    reference=reference,
    shapes={
        "test": [
            {"M": 64, "N": 64, "K": 64},
            {"M": 192, "N": 320, "K": 128},     # partial block tiles in M and N
            {"M": 256, "N": 128, "K": 1024},
            {"M": 640, "N": 448, "K": 576},
            {"M": 2048, "N": 2048, "K": 512},   # many tiles
            {"M": 2112, "N": 2240, "K": 320},   # 128 x 256 tiles (>= 1 per SM), partial in M and N
            {"M": 128, "N": 1024, "K": 2048},
        ],
        "emu": [
            {"M": 64, "N": 64, "K": 64},
            {"M": 64, "N": 128, "K": 64},
        ],
        "bench": [
            {"M": 4096, "N": 4096, "K": 4096},
            {"M": 8192, "N": 1024, "K": 8192},
        ],
    },
    tolerances={"bfloat16": Tolerance(0.0, 1e-2, "frobenius")},
    divisible_by={"M": 64, "N": 64, "K": 64},
    description="bf16 GEMM, fp32 accumulation, bf16 output",
    vendor=vendor,
    flops=flops,
)
