"""transpose: y = x^T for an (M, N) fp32 matrix, written contiguously as (N, M).

Launcher: launch(const float* x, float* y, int M, int N, cudaStream_t). Exact (a copy).
"""

from __future__ import annotations

import torch

from klineage import Scalar, Tensor, Tolerance, Workload


def reference(x: torch.Tensor, M: int, N: int) -> torch.Tensor:
    return x.t().contiguous()


def vendor(x: torch.Tensor, M: int, N: int) -> torch.Tensor:
    return x.t().contiguous()


WORKLOAD = Workload(
    name="transpose",
    args=[
        Tensor("x", ("M", "N"), "float32", "in"),
        Tensor("y", ("N", "M"), "float32", "out"),
        Scalar("M"),
        Scalar("N"),
    ],
    reference=reference,
    shapes={
        "test": [
            {"M": 37, "N": 4097},
            {"M": 1, "N": 1000},
            {"M": 1000, "N": 1},
            {"M": 256, "N": 512},
            {"M": 1023, "N": 65},
            {"M": 2048, "N": 2048},
        ],
        "emu": [
            {"M": 37, "N": 129},
            {"M": 1, "N": 100},
            {"M": 128, "N": 192},
            {"M": 65, "N": 33},
        ],
        "bench": [{"M": 8192, "N": 8192}],
    },
    tolerances={"float32": Tolerance(0.0, 0.0)},
    description="2-D fp32 transpose (out of place, contiguous result)",
    vendor=vendor,
)
