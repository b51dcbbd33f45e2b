"""z = 2 x - 0.5 y over float32 vectors of any length (fixture of the ldg operator)."""

import torch

from klineage import Scalar, Tensor, Workload


def reference(x: torch.Tensor, y: torch.Tensor, n: int) -> torch.Tensor:
    return 2.0 * x - 0.5 * y


WORKLOAD = Workload(
    name="axpby",
    description="z = 2 x - 0.5 y, float32.",
    args=[
        Tensor("x", ("n",), "float32"),
        Tensor("y", ("n",), "float32"),
        Tensor("z", ("n",), "float32", role="out"),
        Scalar("n", "int32"),
    ],
    reference=reference,
    shapes={
        "test": [{"n": 1}, {"n": 1000}, {"n": 4099}],
        "emu": [{"n": 1}, {"n": 333}, {"n": 1027}],
        "bench": [{"n": 1 << 28}],
    },
)
