"""out = sum x^2 over a float32 vector (fixture of the block_atomic operator; float atomics)."""

import torch

from klineage import Scalar, Tensor, Tolerance, Workload


def reference(x: torch.Tensor, n: int) -> torch.Tensor:
    return (x.double() ** 2).sum().reshape(1).float()


WORKLOAD = Workload(
    name="sum_squares",
    description="Sum of squares of a float32 vector, accumulated with float atomics.",
    args=[Tensor("x", ("n",), "float32"), Tensor("out", (1,), "float32", role="out"), Scalar("n", "int32")],
    reference=reference,
    tolerances={"float32": Tolerance(1e-3, 1e-4)},
    nondeterminism_tolerated=True,
    shapes={
        "test": [{"n": 1}, {"n": 1000}, {"n": 4099}, {"n": 65537}],
        "emu": [{"n": 1}, {"n": 700}, {"n": 3001}],
        "bench": [{"n": 1 << 26}],
    },
)
