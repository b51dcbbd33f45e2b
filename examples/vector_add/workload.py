"""Elementwise c = a + b over float32 vectors of any length."""

import torch

from klineage import Scalar, Tensor, Workload


def reference(a: torch.Tensor, b: torch.Tensor, n: int) -> torch.Tensor:
    return a + b


WORKLOAD = Workload(
    name="vector_add",
    description="c = a + b, float32, any length.",
    args=[
        Tensor("a", ("n",), "float32"),
        Tensor("b", ("n",), "float32"),
        Tensor("c", ("n",), "float32", role="out"),
        Scalar("n", "int32"),
    ],
    reference=reference,
    shapes={
        "test": [{"n": 1}, {"n": 1000}, {"n": 4099}, {"n": 65537}],
        "emu": [{"n": 1}, {"n": 1003}, {"n": 4099}],
        "bench": [{"n": 1 << 28}],
    },
    flops=lambda s: float(s["n"]),
)
