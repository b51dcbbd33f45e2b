"""y = leaky_relu(x, 1/8) + b[col], float16 rows of any length (fixture of vectorize's packed path on
16-bit data with a broadcast read that stays scalar)."""

import torch

from klineage import Scalar, Tensor, Workload
from klineage.workload import Tolerance


def reference(x: torch.Tensor, b: torch.Tensor, rows: int, cols: int) -> torch.Tensor:
    v = x.float()
    return (torch.where(v > 0, v, 0.125 * v) + b.float()).half()


WORKLOAD = Workload(
    name="leaky_relu_fp16",
    description="y = leaky_relu(x, 1/8) + b broadcast over rows, fp16, any shape.",
    args=[
        Tensor("x", ("rows", "cols"), "float16"),
        Tensor("b", ("cols",), "float16"),
        Tensor("y", ("rows", "cols"), "float16", role="out", tolerance=Tolerance(2e-3, 2e-3)),
        Scalar("rows", "int32"),
        Scalar("cols", "int32"),
    ],
    reference=reference,
    shapes={
        "test": [{"rows": 1, "cols": 1}, {"rows": 7, "cols": 1001}, {"rows": 3, "cols": 4096}],
        "emu": [{"rows": 1, "cols": 1}, {"rows": 3, "cols": 67}, {"rows": 5, "cols": 64}],
        "bench": [{"rows": 8192, "cols": 8192}],
    },
)
