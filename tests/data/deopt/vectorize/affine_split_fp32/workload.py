"""y = 0.5 x + w over float32 vectors, launched in two halves (fixture of vectorize's packed path
and its alignment dispatch: the second half starts at an offset pointer for odd halves)."""

import torch

from klineage import Scalar, Tensor, Workload


def reference(x: torch.Tensor, w: torch.Tensor, n: int) -> torch.Tensor:
    return 0.5 * x + w


WORKLOAD = Workload(
    name="affine_split_fp32",
    description="y = 0.5 x + w, float32, any length, two launches.",
    args=[
        Tensor("x", ("n",), "float32"),
        Tensor("w", ("n",), "float32"),
        Tensor("y", ("n",), "float32", role="out"),
        Scalar("n", "int32"),
    ],
    reference=reference,
    shapes={
        "test": [{"n": 1}, {"n": 1003}, {"n": 4104}],
        "emu": [{"n": 1}, {"n": 1003}, {"n": 2056}],
        "bench": [{"n": 1 << 28}],
    },
)
