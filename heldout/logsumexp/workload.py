"""logsumexp: per-row log-sum-exp of an (M, N) fp32 matrix, y[m] = log(sum_n exp(x[m, n])).

Held out: a new operator (a max/sum row reduction with a transcendental epilogue). The reference
computes in float64 and rounds once; tolerance: torch's fp32 defaults.
Launcher: launch(const float* x, float* y, int M, int N, cudaStream_t).
"""

from __future__ import annotations

from collections.abc import Mapping

import torch

from klineage import Scalar, Tensor, Workload


def reference(x: torch.Tensor, M: int, N: int) -> torch.Tensor:
    return torch.logsumexp(x.double(), dim=1).float()


def vendor(x: torch.Tensor, M: int, N: int) -> torch.Tensor:
    return torch.logsumexp(x, dim=1)


def flops(b: Mapping[str, int]) -> float:
    # max, subtract, exp, add per element
    return 4.0 * b["M"] * b["N"]


WORKLOAD = Workload(
    name="logsumexp",
    description="per-row log-sum-exp of fp32 rows",
    args=[
        Tensor("x", ("M", "N"), "float32", "in"),
        Tensor("y", ("M",), "float32", "out"),
        Scalar("M"),
        Scalar("N"),
    ],
    reference=reference,
    vendor=vendor,
    flops=flops,
    shapes={
        "test": [{"M": 1, "N": 1}, {"M": 37, "N": 4097}, {"M": 130, "N": 33}, {"M": 9, "N": 10007}],
        "emu": [{"M": 1, "N": 1}, {"M": 37, "N": 301}, {"M": 130, "N": 33}, {"M": 3, "N": 4099}],
        "bench": [{"M": 65536, "N": 4096}],
    },
)
