"""guarded_rows: row softmax of an (M, N) fp32 matrix whose rows are at least a block (256) long:
the shapes of a warp-per-row kernel that tests its block's threads against the row length."""

from __future__ import annotations

import torch

from klineage import Scalar, Tensor, Workload


def reference(x: torch.Tensor, M: int, N: int) -> torch.Tensor:
    return torch.softmax(x.double(), dim=-1).to(torch.float32)


WORKLOAD = Workload(
    name="guarded_rows",
    args=[
        Tensor("x", ("M", "N"), "float32", "in"),
        Tensor("y", ("M", "N"), "float32", "out"),
        Scalar("M"),
        Scalar("N"),
    ],
    reference=reference,
    shapes={
        "test": [{"M": 37, "N": 300}, {"M": 9, "N": 1024}, {"M": 3, "N": 4097}],
        "emu": [{"M": 37, "N": 300}, {"M": 9, "N": 1024}, {"M": 3, "N": 4097}, {"M": 20, "N": 256}],
        "bench": [{"M": 4096, "N": 4096}],
    },
    description="row softmax, rows of at least 256 elements",
)
