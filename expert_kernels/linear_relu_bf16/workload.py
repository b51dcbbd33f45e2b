"""linear_relu_bf16: Y = relu(X @ W^T), the forward of a bias-free linear layer with a fused ReLU.

X is (M, K) and W is (N, K) (nn.Linear's weight layout: the second operand is stored transposed,
its reduction index contiguous), both bf16; the products are summed in fp32 and Y (M, N) is bf16,
row-major. Launcher: launch(const __nv_bfloat16* X, const __nv_bfloat16* W, __nv_bfloat16* Y,
int M, int N, int K, cudaStream_t). Precondition: K is a multiple of 8 (rows of 16 bytes, `divisible_by`); M and N are
any size (the test shapes include odd ones).
The reference computes in float64 from the bf16 inputs and is compared unrounded (fp32): relative
Frobenius error <= 1e-2 (the bf16 rounding of Y alone is about 2e-3).
"""

from __future__ import annotations

from collections.abc import Mapping

import torch

from klineage import Scalar, Tensor, Tolerance, Workload


def reference(X: torch.Tensor, W: torch.Tensor, M: int, N: int, K: int) -> torch.Tensor:
    return torch.relu(X.double() @ W.double().t()).to(torch.float32)


def vendor(X: torch.Tensor, W: torch.Tensor, M: int, N: int, K: int) -> torch.Tensor:
    return torch.relu(torch.nn.functional.linear(X, W))  # cuBLAS bf16 GEMM (NT) + ReLU


def flops(b: Mapping[str, int]) -> float:
    return 2.0 * b["M"] * b["N"] * b["K"]


WORKLOAD = Workload(
    name="linear_relu_bf16",
    args=[
        Tensor("X", ("M", "K"), "bfloat16", "in"),
        Tensor("W", ("N", "K"), "bfloat16", "in"),
        Tensor("Y", ("M", "N"), "bfloat16", "out"),
        Scalar("M"),
        Scalar("N"),
        Scalar("K"),
    ],
    reference=reference,
    shapes={
        "test": [
            {"M": 1, "N": 3, "K": 8},           # smaller than one fragment
            {"M": 67, "N": 45, "K": 40},        # odd M and N, K not a multiple of the K slice
            {"M": 128, "N": 128, "K": 64},
            {"M": 300, "N": 520, "K": 264},     # partial block tiles
            {"M": 1024, "N": 768, "K": 1024},
            {"M": 2048, "N": 2048, "K": 512},   # many tiles
            {"M": 129, "N": 4096, "K": 2048},
        ],
        "emu": [
            {"M": 67, "N": 45, "K": 40},
            {"M": 128, "N": 128, "K": 64},
        ],
        "bench": [
            {"M": 4096, "N": 4096, "K": 4096},
            {"M": 8192, "N": 2048, "K": 8192},
        ],
    },
    tolerances={"bfloat16": Tolerance(0.0, 1e-2, "frobenius")},
    divisible_by={"K": 8},
    description="bf16 linear layer (X W^T), fp32 accumulation, fused ReLU, bf16 output",
    vendor=vendor,
    flops=flops,
)
