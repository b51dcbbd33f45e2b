"""y[r] = sum_j x[r, j] + max_j x[r, j], float32 (fixture of the cg_reduce operator)."""

import torch

from klineage import Scalar, Tensor, Tolerance, Workload


def reference(x: torch.Tensor, M: int, N: int) -> torch.Tensor:
    xd = x.double()
    return (xd.sum(dim=1) + xd.max(dim=1).values).float()


WORKLOAD = Workload(
    name="row_sum_max",
    description="Per-row sum plus per-row max of an M x N float32 matrix.",
    args=[
        Tensor("x", ("M", "N"), "float32"),
        Tensor("y", ("M",), "float32", role="out"),
        Scalar("M", "int32"),
        Scalar("N", "int32"),
    ],
    reference=reference,
    tolerances={"float32": Tolerance(1e-4, 1e-4)},
    shapes={
        "test": [{"M": 1, "N": 1}, {"M": 37, "N": 1000}, {"M": 9, "N": 33}],
        "emu": [{"M": 1, "N": 1}, {"M": 9, "N": 33}, {"M": 5, "N": 300}],
        "bench": [{"M": 65536, "N": 1024}],
    },
)
