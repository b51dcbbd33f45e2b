"""transpose_fp16: out-of-place transpose of a non-square fp16 matrix, x (M, N) -> y (N, M).

Held out: a new dtype (2-byte elements change the coalescing and bank-conflict arithmetic) and new
aspect ratios (tall and wide, far from square) of the corpus's fp32 transpose family. Exact.
Launcher: launch(const __half* x, __half* y, int M, int N, cudaStream_t).
"""

from __future__ import annotations

import torch

from klineage import Scalar, Tensor, Tolerance, Workload


def reference(x: torch.Tensor, M: int, N: int) -> torch.Tensor:
    return x.t().contiguous()


def vendor(x: torch.Tensor, M: int, N: int) -> torch.Tensor:
    return x.t().contiguous()


WORKLOAD = Workload(
    name="transpose_fp16",
    description="2-D transpose of a non-square fp16 matrix",
    args=[
        Tensor("x", ("M", "N"), "float16", "in"),
        Tensor("y", ("N", "M"), "float16", "out"),
        Scalar("M"),
        Scalar("N"),
    ],
    reference=reference,
    vendor=vendor,
    tolerances={"float16": Tolerance(0.0, 0.0)},
    shapes={
        "test": [{"M": 1, "N": 1}, {"M": 3, "N": 5000}, {"M": 4099, "N": 17}, {"M": 333, "N": 1027}],
        "emu": [{"M": 1, "N": 1}, {"M": 3, "N": 1500}, {"M": 1025, "N": 17}, {"M": 100, "N": 129}],
        "bench": [{"M": 4096, "N": 65536}],
    },
)
