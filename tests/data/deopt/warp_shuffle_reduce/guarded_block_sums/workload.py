"""Sums of 256-element chunks (fixture of warp_shuffle_reduce: a guarded, rolled shuffle loop)."""

import torch

from klineage import Scalar, Tensor, Workload
from klineage.workload import Tolerance


def reference(x: torch.Tensor, N: int, B: int) -> torch.Tensor:
    return x.double().reshape(-1, 256).sum(-1).float()


WORKLOAD = Workload(
    name="guarded_chunk_sums",
    description="sums of 256-element chunks (fixture of warp_shuffle_reduce)",
    args=[
        Tensor("x", ("N",), "float32", "in"),
        Tensor("out", ("B",), "float32", "out"),
        Scalar("N"),
        Scalar("B"),
    ],
    reference=reference,
    divisible_by={"N": 256},
    tolerances={"float32": Tolerance(1e-4, 1e-5)},
    shapes={
        "test": [{"N": 256, "B": 1}, {"N": 2560, "B": 10}],
        "emu": [{"N": 256, "B": 1}, {"N": 2560, "B": 10}],
        "bench": [{"N": 1 << 25, "B": 1 << 17}],
    },
)
