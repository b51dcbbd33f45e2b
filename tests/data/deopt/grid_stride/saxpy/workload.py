"""z = 2.5 * x + y over float32 vectors of any length (fixture of the grid_stride operator)."""

import torch

from klineage import Scalar, Tensor, Workload


def reference(x: torch.Tensor, y: torch.Tensor, n: int) -> torch.Tensor:
    return 2.5 * x + y


WORKLOAD = Workload(
    name="saxpy",
    description="z = 2.5 x + y, float32, any length.",
    args=[
        Tensor("x", ("n",), "float32"),
        Tensor("y", ("n",), "float32"),
        Tensor("z", ("n",), "float32", role="out"),
        Scalar("n", "int32"),
    ],
    reference=reference,
    shapes={
        "test": [{"n": 1}, {"n": 1000}, {"n": 4099}, {"n": 65537}],
        "emu": [{"n": 1}, {"n": 517}, {"n": 1030}],
        "bench": [{"n": 1 << 28}],
    },
)
