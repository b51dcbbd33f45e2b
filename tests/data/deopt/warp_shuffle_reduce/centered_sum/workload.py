"""y[r] = sum_j (x[r, j] - max_j x[r, j]) (fixture of the warp_shuffle_reduce operator)."""

import torch

from klineage import Scalar, Tensor, Tolerance, Workload


def reference(x: torch.Tensor, M: int, N: int) -> torch.Tensor:
    xd = x.double()
    return (xd - xd.max(dim=1, keepdim=True).values).sum(dim=1).float()


WORKLOAD = Workload(
    name="centered_sum",
    description="Per-row sum of x minus the row max, float32.",
    args=[
        Tensor("x", ("M", "N"), "float32"),
        Tensor("y", ("M",), "float32", role="out"),
        Scalar("M", "int32"),
        Scalar("N", "int32"),
    ],
    reference=reference,
    tolerances={"float32": Tolerance(1e-3, 1e-4)},
    shapes={
        "test": [{"M": 1, "N": 1}, {"M": 7, "N": 100}, {"M": 5, "N": 1001}, {"M": 64, "N": 4096}],
        "emu": [{"M": 2, "N": 1}, {"M": 7, "N": 100}, {"M": 3, "N": 700}],
        "bench": [{"M": 8192, "N": 8192}],
    },
)
