"""softmax: row-wise softmax over the last dimension of an (M, N) matrix of fp32 rows.

Launcher: launch(const float* x, float* y, int M, int N, cudaStream_t).
The reference computes in float64 and rounds once to float32; tolerance: torch's float32 defaults.
"""

from __future__ import annotations

from collections.abc import Mapping

import torch

from klineage import Scalar, Tensor, Workload


def reference(x: torch.Tensor, M: int, N: int) -> torch.Tensor:
    return torch.softmax(x.double(), dim=-1).to(torch.float32)


def vendor(x: torch.Tensor, M: int, N: int) -> torch.Tensor:
    return torch.softmax(x, dim=-1)


def flops(b: Mapping[str, int]) -> float:
    # max, subtract, exp, sum, scale per element
    return 5.0 * b["M"] * b["N"]


WORKLOAD = Workload(
    name="softmax",
    args=[
        Tensor("x", ("M", "N"), "float32", "in"),
        Tensor("y", ("M", "N"), "float32", "out"),
        Scalar("M"),
        Scalar("N"),
    ],
    reference=reference,
    shapes={
        "test": [
            {"M": 37, "N": 4097},
            {"M": 64, "N": 1000},
            {"M": 100, "N": 1},
            {"M": 129, "N": 33},
            {"M": 300, "N": 4096},
            {"M": 16, "N": 2048},
            {"M": 3, "N": 20000},
            {"M": 5, "N": 12289},
        ],
        "emu": [
            {"M": 37, "N": 1025},
            {"M": 61, "N": 33},
            {"M": 8, "N": 4096},
            {"M": 2, "N": 16384},
            {"M": 3, "N": 8193},
            {"M": 50, "N": 1},
        ],
        "bench": [{"M": 8192, "N": 4096}],
    },
    description="row-wise softmax, fp32 rows",
    vendor=vendor,
    flops=flops,
)
