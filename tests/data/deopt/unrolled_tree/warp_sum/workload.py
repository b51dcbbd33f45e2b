"""Sum of a float32 vector in two launches (fixture of unrolled_tree: a warp reduction unrolled by hand,
each level guarded by the template block size)."""

import torch

from klineage import Scalar, Tensor, Workload

BLOCKS = 8


def reference(x: torch.Tensor, n: int) -> torch.Tensor:
    return x.double().sum().reshape(1).float()


WORKLOAD = Workload(
    name="unrolled_warp_sum",
    description="sum of a float32 vector in two launches (fixture of unrolled_tree)",
    args=[
        Tensor("x", ("n",), "float32"),
        Tensor("out", (1,), "float32", role="out"),
        Tensor("partial", (BLOCKS,), "float32", role="scratch"),
        Scalar("n", "int32"),
    ],
    reference=reference,
    shapes={
        "test": [{"n": 1}, {"n": 1000}, {"n": 70001}],
        "emu": [{"n": 1}, {"n": 517}, {"n": 5003}],
        "bench": [{"n": 1 << 26}],
    },
)
