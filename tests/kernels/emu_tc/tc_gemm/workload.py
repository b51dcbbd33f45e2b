"""tc_gemm (emu tensor-core test workload): C = A @ B, bf16 A (M, K) and B (K, N) row-major, fp32
accumulation, bf16 C. M and N multiples of 64, K a multiple of 32."""

from __future__ import annotations

import torch

from klineage import Scalar, Tensor, Tolerance, Workload


def reference(A: torch.Tensor, B: torch.Tensor, M: int, N: int, K: int) -> torch.Tensor:
    return (A.double() @ B.double()).to(torch.float32)


WORKLOAD = Workload(
    name="tc_gemm",
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
        "test": [{"M": 64, "N": 64, "K": 64}, {"M": 128, "N": 192, "K": 96}],
        "emu": [{"M": 64, "N": 64, "K": 64}, {"M": 128, "N": 64, "K": 96}],
        "bench": [{"M": 1024, "N": 1024, "K": 1024}],
    },
    tolerances={"bfloat16": Tolerance(0.0, 1e-2, "frobenius")},
    divisible_by={"M": 64, "N": 64, "K": 32},
    description="bf16 GEMM on tensor cores (emu test workload)",
)
