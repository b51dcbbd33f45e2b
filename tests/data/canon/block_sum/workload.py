"""Per-block partial sums of a float32 vector, one block sum per slot (fixture of the canonicalizer).

The kernel is written in the spellings the canonicalizer rewrites: a while loop stepping by a
precomputed grid stride, a cooperative-groups barrier, a `#define` and an enum of sizes, a
template block size, and launcher locals named gridDim / blockDim.
"""

import torch

from klineage import Scalar, Tensor, Workload

BLOCKS = 8


def reference(x: torch.Tensor, n: int) -> torch.Tensor:
    return x.double().sum().reshape(1).float()


WORKLOAD = Workload(
    name="canon_block_sum",
    description="sum of a float32 vector in two launches (fixture of the canonicalizer)",
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
