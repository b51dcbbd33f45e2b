"""out = a * x + y on a row-major R x C matrix, a 2-D grid (fixture of coalesced_mapping)."""

import torch

from klineage import Scalar, Tensor, Workload


def reference(x: torch.Tensor, y: torch.Tensor, R: int, C: int) -> torch.Tensor:
    return (2.5 * x.double() + y.double()).float()


WORKLOAD = Workload(
    name="coalesced_mapping_scaled_add",
    description="out = 2.5 x + y, row-major (fixture of coalesced_mapping)",
    args=[
        Tensor("x", ("R", "C"), "float32", "in"),
        Tensor("y", ("R", "C"), "float32", "in"),
        Tensor("out", ("R", "C"), "float32", "out"),
        Scalar("R"),
        Scalar("C"),
    ],
    reference=reference,
    shapes={
        "test": [{"R": 33, "C": 70}, {"R": 1, "C": 5}],
        "emu": [{"R": 33, "C": 70}, {"R": 17, "C": 3}],
        "bench": [{"R": 8192, "C": 8192}],
    },
)
