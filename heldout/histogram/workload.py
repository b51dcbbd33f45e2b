"""histogram: 256-bin histogram of uint8 bytes x (N,), int32 counts (torch.bincount).

Held out: a new operator (a scatter with conflicts). Integer atomics are order-independent, so
the result is deterministic: nondeterminism is not tolerated. The default uint8 init is uniform
over all 256 values. Counts are exact.
Launcher: launch(const uint8_t* x, int* counts, int N, cudaStream_t). The naive launcher clears
the counts with one kernel and adds with a second, both on `stream`.
"""

from __future__ import annotations

import torch

from klineage import Scalar, Tensor, Workload


def reference(x: torch.Tensor, N: int) -> torch.Tensor:
    return torch.bincount(x.long(), minlength=256).to(torch.int32)


def vendor(x: torch.Tensor, N: int) -> torch.Tensor:
    return torch.bincount(x, minlength=256)


WORKLOAD = Workload(
    name="histogram",
    description="256-bin byte histogram with int32 counts",
    args=[
        Tensor("x", ("N",), "uint8", "in"),
        Tensor("counts", (256,), "int32", "out"),
        Scalar("N"),
    ],
    reference=reference,
    vendor=vendor,
    shapes={
        "test": [{"N": 1}, {"N": 4097}, {"N": 100003}, {"N": 1 << 20}],
        "emu": [{"N": 1}, {"N": 4097}, {"N": 10007}, {"N": 16384}],
        "bench": [{"N": 1 << 30}],
    },
)
