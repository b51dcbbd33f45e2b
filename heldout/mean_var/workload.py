"""mean_var: per-row mean and biased variance of an (M, N) fp32 matrix (torch.var_mean with
correction=0), two outputs.

Held out: a new operator (two statistics from one row reduction, two output tensors). The
reference computes in float64 and rounds once; tolerance: torch's fp32 defaults.
Launcher: launch(const float* x, float* mean, float* var, int M, int N, cudaStream_t).
"""

from __future__ import annotations

from collections.abc import Mapping

import torch

from klineage import Scalar, Tensor, Workload


def reference(x: torch.Tensor, M: int, N: int) -> dict[str, torch.Tensor]:
    v, m = torch.var_mean(x.double(), dim=1, correction=0)
    return {"mean": m.float(), "var": v.float()}


def vendor(x: torch.Tensor, M: int, N: int) -> tuple[torch.Tensor, torch.Tensor]:
    v, m = torch.var_mean(x, dim=1, correction=0)
    return m, v


def flops(b: Mapping[str, int]) -> float:
    # sum, subtract, square-accumulate per element
    return 4.0 * b["M"] * b["N"]


WORKLOAD = Workload(
    name="mean_var",
    description="per-row mean and biased variance of fp32 rows",
    args=[
        Tensor("x", ("M", "N"), "float32", "in"),
        Tensor("mean", ("M",), "float32", "out"),
        Tensor("var", ("M",), "float32", "out"),
        Scalar("M"),
        Scalar("N"),
    ],
    reference=reference,
    vendor=vendor,
    flops=flops,
    shapes={
        "test": [{"M": 1, "N": 1}, {"M": 37, "N": 4097}, {"M": 200, "N": 65}, {"M": 5, "N": 12289}],
        "emu": [{"M": 1, "N": 1}, {"M": 37, "N": 511}, {"M": 200, "N": 65}, {"M": 2, "N": 5003}],
        "bench": [{"M": 65536, "N": 4096}],
    },
)
