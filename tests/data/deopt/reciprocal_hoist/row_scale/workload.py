"""Rows divided by (1 + their L1 norm) (fixture of the reciprocal_hoist operator)."""

import torch

from klineage import Scalar, Tensor, Workload
from klineage.workload import Tolerance


def reference(x: torch.Tensor, M: int, N: int) -> torch.Tensor:
    xd = x.double()
    return (xd / (xd.abs().sum(dim=1, keepdim=True) + 1.0)).float()


WORKLOAD = Workload(
    name="l1_normalize",
    description="y = x / (1 + sum |x|) per row, float32.",
    args=[
        Tensor("x", ("M", "N"), "float32"),
        Tensor("y", ("M", "N"), "float32", role="out", tolerance=Tolerance(1e-6, 1e-5)),
        Scalar("M", "int32"),
        Scalar("N", "int32"),
    ],
    reference=reference,
    shapes={
        "test": [{"M": 1, "N": 1}, {"M": 37, "N": 1000}, {"M": 64, "N": 256}],
        "emu": [{"M": 1, "N": 1}, {"M": 3, "N": 129}, {"M": 6, "N": 500}],
        "bench": [{"M": 8192, "N": 8192}],
    },
)
