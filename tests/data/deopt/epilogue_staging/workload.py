"""fp16 GEMM for the epilogue_staging tests: C = A @ B with fp16 A (M, K), B (K, N) and C (M, N),
row-major, the kernel accumulating in fp16. M a multiple of 32, N of 64, K of 16 (its tiles)."""

from __future__ import annotations

import torch

from klineage import Scalar, Tensor, Tolerance, Workload


def reference(A, B, M: int, N: int, K: int) -> torch.Tensor:
    return (A.double() @ B.double()).to(torch.float32)


WORKLOAD = Workload(
    name="epilogue_staging_hgemm",
    args=[
        Tensor("A", ("M", "K"), "float16", "in"),
        Tensor("B", ("K", "N"), "float16", "in"),
        Tensor("C", ("M", "N"), "float16", "out"),
        Scalar("M"),
        Scalar("N"),
        Scalar("K"),
    ],
    reference=reference,
    shapes={
        "test": [{"M": 64, "N": 128, "K": 64}],
        "emu": [{"M": 32, "N": 64, "K": 32}, {"M": 64, "N": 128, "K": 16}],
        "bench": [{"M": 1024, "N": 1024, "K": 1024}],
    },
    tolerances={"float16": Tolerance(0.0, 2e-2, "frobenius")},
    divisible_by={"M": 32, "N": 64, "K": 16},
    description="fp16 GEMM, fp16 accumulation, epilogue staged through shared memory",
)
