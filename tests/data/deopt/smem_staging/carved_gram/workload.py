"""carved_gram: per block of 32 rows of D floats, the Gram matrix G[b] = X[b] X[b]^T (32 x 32)."""

from __future__ import annotations

import torch

from klineage import Scalar, Tensor, Workload


def reference(X: torch.Tensor, B: int, D: int) -> torch.Tensor:
    x = X.double()
    return (x @ x.transpose(-1, -2)).to(torch.float32)


WORKLOAD = Workload(
    name="carved_gram",
    args=[
        Tensor("X", ("B", "R", "D"), "float32", "in"),
        Tensor("G", ("B", "R", "R"), "float32", "out"),
        Scalar("B"),
        Scalar("D"),
    ],
    reference=reference,
    shapes={
        "test": [{"B": 2, "R": 32, "D": 16}, {"B": 3, "R": 32, "D": 7}],
        "emu": [{"B": 2, "R": 32, "D": 16}, {"B": 3, "R": 32, "D": 7}, {"B": 1, "R": 32, "D": 40}],
        "bench": [{"B": 1024, "R": 32, "D": 64}],
    },
    description="Gram matrix of 32-row blocks",
)
