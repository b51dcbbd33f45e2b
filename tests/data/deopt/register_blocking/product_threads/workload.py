"""C = A @ B, row-major float32 (fixture of the register_blocking operator)."""

import torch

from klineage import Scalar, Tensor, Tolerance, Workload


def reference(A: torch.Tensor, B: torch.Tensor, M: int, N: int, K: int) -> torch.Tensor:
    return (A.double() @ B.double()).float()


WORKLOAD = Workload(
    name="sgemm_product_threads",
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
        "test": [{"M": 1, "N": 1, "K": 1}, {"M": 100, "N": 70, "K": 33}, {"M": 256, "N": 256, "K": 256}],
        "emu": [{"M": 1, "N": 1, "K": 1}, {"M": 17, "N": 70, "K": 9}, {"M": 65, "N": 33, "K": 20}],
        "bench": [{"M": 8192, "N": 8192, "K": 8192}],
    },
    flops=lambda s: 2.0 * s["M"] * s["N"] * s["K"],
)
