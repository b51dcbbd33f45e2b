"""C = A @ B, row-major float32 (fixture of the inline_staging_helper canon rule)."""

import torch

from klineage import Scalar, Tensor, Tolerance, Workload


def reference(A: torch.Tensor, B: torch.Tensor, M: int, N: int, K: int) -> torch.Tensor:
    return (A.double() @ B.double()).float()


WORKLOAD = Workload(
    name="staged_gemm",
    description="Row-major fp32 GEMM, any M, N, K.",
    args=[
        Tensor("A", ("M", "K"), "float32"),
        Tensor("B", ("K", "N"), "float32"),
        Tensor("C", ("M", "N"), "float32", role="out"),
        Scalar("M", "int32"),
        Scalar("N", "int32"),
        Scalar("K", "int32"),
    ],
    reference=reference,
    tolerances={"float32": Tolerance(1e-4, 1e-5, "frobenius")},
    shapes={
        "test": [{"M": 1, "N": 1, "K": 1}, {"M": 100, "N": 70, "K": 33}],
        "emu": [{"M": 1, "N": 1, "K": 1}, {"M": 19, "N": 21, "K": 18}],
        "bench": [{"M": 4096, "N": 4096, "K": 4096}],
    },
    flops=lambda s: 2.0 * s["M"] * s["N"] * s["K"],
)
