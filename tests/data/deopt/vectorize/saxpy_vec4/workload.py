"""y = 3 a + b over float32 vectors of any length (fixture of the vectorize operator)."""

import torch

from klineage import Scalar, Tensor, Workload


def reference(a: torch.Tensor, b: torch.Tensor, n: int) -> torch.Tensor:
    return 3.0 * a + b


WORKLOAD = Workload(
    name="saxpy_vec4",
    description="y = 3 a + b, float32, any length.",
    args=[
        Tensor("a", ("n",), "float32"),
        Tensor("b", ("n",), "float32"),
        Tensor("y", ("n",), "float32", role="out"),
        Scalar("n", "int32"),
    ],
    reference=reference,
    shapes={
        "test": [{"n": 1}, {"n": 1003}, {"n": 4099}],
        "emu": [{"n": 3}, {"n": 1003}, {"n": 2050}],
        "bench": [{"n": 1 << 28}],
    },
)
