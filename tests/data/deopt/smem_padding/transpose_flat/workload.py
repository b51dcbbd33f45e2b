"""y[N][M] = x[M][N]^T, float32 (fixture: padding written as a flat row stride)."""

import torch

from klineage import Scalar, Tensor, Workload


def reference(x: torch.Tensor, M: int, N: int) -> torch.Tensor:
    return x.t().contiguous()


WORKLOAD = Workload(
    name="transpose_flat_fixture",
    description="y = x^T for an M x N float32 matrix.",
    args=[
        Tensor("x", ("M", "N"), "float32"),
        Tensor("y", ("N", "M"), "float32", role="out"),
        Scalar("M", "int32"),
        Scalar("N", "int32"),
    ],
    reference=reference,
    shapes={
        "test": [{"M": 1, "N": 1}, {"M": 33, "N": 70}, {"M": 256, "N": 128}],
        "emu": [{"M": 1, "N": 1}, {"M": 33, "N": 70}, {"M": 64, "N": 32}],
        "bench": [{"M": 16384, "N": 16384}],
    },
)
