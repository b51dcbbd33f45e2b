"""Sums of 512-element chunks (fixture of load_add)."""

import torch

from klineage import Scalar, Tensor, Workload
from klineage.workload import Tolerance


def reference(x: torch.Tensor, N: int, B: int) -> torch.Tensor:
    return x.double().reshape(-1, 512).sum(-1).float()


WORKLOAD = Workload(
    name="load_add_items_chunk",
    description="sums of 512-element chunks (fixture of load_add)",
    args=[
        Tensor("x", ("N",), "float32", "in"),
        Tensor("out", ("B",), "float32", "out"),
        Scalar("N"),
        Scalar("B"),
    ],
    reference=reference,
    divisible_by={"N": 512},
    tolerances={"float32": Tolerance(1e-4, 1e-5)},
    shapes={
        "test": [{"N": 512, "B": 1}, {"N": 3584, "B": 7}],
        "emu": [{"N": 512, "B": 1}, {"N": 3584, "B": 7}],
        "bench": [{"N": 1 << 25, "B": (1 << 25) // 512}],
    },
)
