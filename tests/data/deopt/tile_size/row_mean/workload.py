"""y[r] = mean_j x[r, j], float32 (fixture of the tile_size operator)."""

import torch

from klineage import Scalar, Tensor, Tolerance, Workload


def reference(x: torch.Tensor, M: int, N: int) -> torch.Tensor:
    return x.double().mean(dim=1).float()


WORKLOAD = Workload(
    name="row_mean",
    description="Per-row mean of an M x N float32 matrix.",
    args=[
        Tensor("x", ("M", "N"), "float32"),
        Tensor("y", ("M",), "float32", role="out"),
        Scalar("M", "int32"),
        Scalar("N", "int32"),
    ],
    reference=reference,
    tolerances={"float32": Tolerance(1e-5, 1e-4)},
    shapes={
        "test": [{"M": 1, "N": 1}, {"M": 37, "N": 1000}, {"M": 300, "N": 257}],
        "emu": [{"M": 1, "N": 1}, {"M": 5, "N": 300}, {"M": 260, "N": 3}],
        "bench": [{"M": 8192, "N": 8192}],
    },
)
