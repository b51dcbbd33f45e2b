"""Row sums of an M x N float32 matrix (fixture of the canonicalizer: cooperative-groups warp tiles)."""

import torch

from klineage import Scalar, Tensor, Workload


def reference(x: torch.Tensor, M: int, N: int) -> torch.Tensor:
    return x.double().sum(dim=1).float()


WORKLOAD = Workload(
    name="canon_tile_rows",
    description="row sums of a float32 matrix, a cooperative-groups tile per row (fixture of the canonicalizer)",
    args=[
        Tensor("x", ("M", "N"), "float32"),
        Tensor("y", ("M",), "float32", role="out"),
        Scalar("M", "int32"),
        Scalar("N", "int32"),
    ],
    reference=reference,
    shapes={
        "test": [{"M": 1, "N": 7}, {"M": 300, "N": 33}, {"M": 1025, "N": 64}],
        "emu": [{"M": 1, "N": 7}, {"M": 300, "N": 33}, {"M": 129, "N": 64}],
        "bench": [{"M": 1 << 16, "N": 4096}],
    },
)
