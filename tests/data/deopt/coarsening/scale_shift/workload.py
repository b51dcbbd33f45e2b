"""y = 1.5 x - 0.25 over a float32 vector of any length (fixture of the coarsening operator)."""

import torch

from klineage import Scalar, Tensor, Workload


def reference(x: torch.Tensor, n: int) -> torch.Tensor:
    return 1.5 * x - 0.25


WORKLOAD = Workload(
    name="scale_shift",
    description="y = 1.5 x - 0.25, float32.",
    args=[Tensor("x", ("n",), "float32"), Tensor("y", ("n",), "float32", role="out"), Scalar("n", "int32")],
    reference=reference,
    shapes={
        "test": [{"n": 1}, {"n": 1000}, {"n": 4099}, {"n": 65537}],
        "emu": [{"n": 1}, {"n": 515}, {"n": 2049}],
        "bench": [{"n": 1 << 28}],
    },
)
