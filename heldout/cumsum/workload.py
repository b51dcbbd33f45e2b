"""cumsum: inclusive prefix sum along each row of an (M, N) fp32 matrix.

Held out: a new operator (a scan). The reference computes in float64 and rounds once.
Tolerance: fp32 rtol stays at torch's 1.3e-6; atol is 1e-3 instead of 1e-5, because a prefix sum
provably needs it: the j-th output is a sum of j+1 terms whose partial sums wander to |S| ~ sqrt(j)
(~100 at N = 10^4), every fp32 addition rounds by up to 2^-24 * |S| ~ 6e-6, and any summation order
(sequential, or a parallel scan's tree) accumulates many such roundings into an output that can
itself be near zero. Measured, sequential fp32 scan vs float64, excess over rtol, 4 seeds x 8 rows:
1.3e-4 at N = 4097, 2.0e-4 at N = 6001, 5.6e-4 at N = 10007.
Launcher: launch(const float* x, float* y, int M, int N, cudaStream_t).
"""

from __future__ import annotations

from collections.abc import Mapping

import torch

from klineage import Scalar, Tensor, Tolerance, Workload


def reference(x: torch.Tensor, M: int, N: int) -> torch.Tensor:
    return torch.cumsum(x.double(), dim=1).float()


def vendor(x: torch.Tensor, M: int, N: int) -> torch.Tensor:
    return torch.cumsum(x, dim=1)


def flops(b: Mapping[str, int]) -> float:
    return 1.0 * b["M"] * b["N"]


WORKLOAD = Workload(
    name="cumsum",
    description="inclusive prefix sum along fp32 rows",
    args=[
        Tensor("x", ("M", "N"), "float32", "in"),
        Tensor("y", ("M", "N"), "float32", "out"),
        Scalar("M"),
        Scalar("N"),
    ],
    reference=reference,
    vendor=vendor,
    flops=flops,
    tolerances={"float32": Tolerance(atol=1e-3, rtol=1.3e-6)},
    shapes={
        "test": [{"M": 1, "N": 1}, {"M": 37, "N": 4097}, {"M": 129, "N": 33}, {"M": 4, "N": 10007}],
        "emu": [{"M": 1, "N": 1}, {"M": 37, "N": 301}, {"M": 129, "N": 33}, {"M": 2, "N": 6001}],
        "bench": [{"M": 32768, "N": 4096}],
    },
)
