"""transpose_batched: y[b] = x[b]^T for B fp32 matrices of (M, N), written as (B, N, M).

Launcher: launch(const float* x, float* y, int B, int M, int N, cudaStream_t). Exact (a copy).
Precondition: B <= 65535 (one grid z-slice per matrix).
"""

from __future__ import annotations

import torch

from klineage import Scalar, Tensor, Tolerance, Workload


def reference(x: torch.Tensor, B: int, M: int, N: int) -> torch.Tensor:
    return x.transpose(1, 2).contiguous()


def vendor(x: torch.Tensor, B: int, M: int, N: int) -> torch.Tensor:
    return x.transpose(1, 2).contiguous()


WORKLOAD = Workload(
    name="transpose_batched",
    args=[
        Tensor("x", ("B", "M", "N"), "float32", "in"),
        Tensor("y", ("B", "N", "M"), "float32", "out"),
        Scalar("B"),
        Scalar("M"),
        Scalar("N"),
    ],
    reference=reference,
    shapes={
        "test": [
            {"B": 3, "M": 37, "N": 4097},
            {"B": 7, "M": 1, "N": 1000},
            {"B": 1, "M": 1000, "N": 1},
            {"B": 5, "M": 256, "N": 512},
            {"B": 2, "M": 1023, "N": 65},
            {"B": 64, "M": 33, "N": 31},
        ],
        "emu": [
            {"B": 3, "M": 37, "N": 129},
            {"B": 5, "M": 1, "N": 100},
            {"B": 2, "M": 128, "N": 64},
            {"B": 9, "M": 33, "N": 17},
        ],
        "bench": [{"B": 32, "M": 2048, "N": 1024}],
    },
    tolerances={"float32": Tolerance(0.0, 0.0)},
    description="batched fp32 transpose of the last two dimensions",
    vendor=vendor,
)
