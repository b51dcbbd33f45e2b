"""C = A B, fp32, any M, N, K (fixture of the smem_staging operator)."""

import torch

from klineage import Scalar, Tensor, Workload
from klineage.workload import Tolerance


def reference(A: torch.Tensor, B: torch.Tensor, M: int, N: int, K: int) -> torch.Tensor:
    return (A.double() @ B.double()).float()


WORKLOAD = Workload(
    name="sgemm_tiled",
    description="C = A B, fp32 row-major, any sizes.",
    args=[
        Tensor("A", ("M", "K"), "float32"),
        Tensor("B", ("K", "N"), "float32"),
        Tensor("C", ("M", "N"), "float32", role="out", tolerance=Tolerance(1e-4, 1e-4)),
        Scalar("M", "int32"),
        Scalar("N", "int32"),
        Scalar("K", "int32"),
    ],
    reference=reference,
    shapes={
        "test": [{"M": 1, "N": 1, "K": 1}, {"M": 33, "N": 17, "K": 40}, {"M": 128, "N": 96, "K": 64}],
        "emu": [{"M": 1, "N": 1, "K": 1}, {"M": 33, "N": 17, "K": 40}, {"M": 16, "N": 32, "K": 20}],
        "bench": [{"M": 4096, "N": 4096, "K": 4096}],
    },
)
