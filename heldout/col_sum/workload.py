"""col_sum: per-column sum of an (M, N) fp32 matrix, y[n] = sum_m x[m, n].

Held out: the other axis of the corpus's reduce_sum_rows family: the reduction runs along the
strided dimension, so the row kernels' warp-per-row structure does not apply as is. The reference
computes in float64 and rounds once; tolerance: torch's fp32 defaults. A plain fp32 loop down a
column of ~1000 N(0,1) values already rounds by ~5e-5 (measured), beyond the defaults for small
sums, so kernels accumulate in double (as the corpus's row sums do) and round once at the end.
Launcher: launch(const float* x, float* y, int M, int N, cudaStream_t).
"""

from __future__ import annotations

from collections.abc import Mapping

import torch

from klineage import Scalar, Tensor, Workload


def reference(x: torch.Tensor, M: int, N: int) -> torch.Tensor:
    return x.double().sum(dim=0).float()


def vendor(x: torch.Tensor, M: int, N: int) -> torch.Tensor:
    return x.sum(dim=0)


def flops(b: Mapping[str, int]) -> float:
    return 1.0 * b["M"] * b["N"]


WORKLOAD = Workload(
    name="col_sum",
    description="per-column sum of an fp32 matrix",
    args=[
        Tensor("x", ("M", "N"), "float32", "in"),
        Tensor("y", ("N",), "float32", "out"),
        Scalar("M"),
        Scalar("N"),
    ],
    reference=reference,
    vendor=vendor,
    flops=flops,
    shapes={
        "test": [{"M": 1, "N": 1}, {"M": 4099, "N": 37}, {"M": 33, "N": 5000}, {"M": 1000, "N": 1025}],
        "emu": [{"M": 1, "N": 1}, {"M": 1025, "N": 7}, {"M": 33, "N": 900}, {"M": 130, "N": 129}],
        "bench": [{"M": 4096, "N": 32768}],
    },
)
