"""Rows of an M x N float32 matrix standardized to zero mean and unit variance (fixture of the
one_pass_variance operator)."""

import torch

from klineage import Scalar, Tensor, Workload


def reference(x: torch.Tensor, M: int, N: int) -> torch.Tensor:
    xd = x.double()
    mean = xd.mean(dim=1, keepdim=True)
    var = ((xd - mean) ** 2).mean(dim=1, keepdim=True)
    return ((xd - mean) / torch.sqrt(var + 1e-5)).float()


WORKLOAD = Workload(
    name="row_standardize",
    description="row standardization, one thread per row (fixture of one_pass_variance)",
    args=[
        Tensor("x", ("M", "N"), "float32"),
        Tensor("y", ("M", "N"), "float32", role="out"),
        Scalar("M", "int32"),
        Scalar("N", "int32"),
    ],
    reference=reference,
    shapes={
        "test": [{"M": 1, "N": 7}, {"M": 300, "N": 33}],
        "emu": [{"M": 1, "N": 7}, {"M": 70, "N": 33}],
        "bench": [{"M": 1 << 14, "N": 1024}],
    },
)
