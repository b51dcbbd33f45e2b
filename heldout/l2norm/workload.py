"""l2norm: L2-normalize each row of an (M, N) fp32 matrix, y = x / max(||x||_2, eps) (F.normalize).

Held out: a new operator (a sum-of-squares row reduction feeding an elementwise scale). The
reference computes in float64 and rounds once; tolerance: torch's fp32 defaults.
Launcher: launch(const float* x, float* y, int M, int N, float eps, cudaStream_t).
"""

from __future__ import annotations

from collections.abc import Mapping

import torch
import torch.nn.functional as F

from klineage import Scalar, Tensor, Workload

EPS = 1e-12


def reference(x: torch.Tensor, M: int, N: int, eps: float) -> torch.Tensor:
    return F.normalize(x.double(), p=2.0, dim=1, eps=eps).float()


def vendor(x: torch.Tensor, M: int, N: int, eps: float) -> torch.Tensor:
    return F.normalize(x, p=2.0, dim=1, eps=eps)


def flops(b: Mapping[str, int]) -> float:
    # square-accumulate, then one scale per element
    return 3.0 * b["M"] * b["N"]


WORKLOAD = Workload(
    name="l2norm",
    description="row-wise L2 normalization of fp32 rows",
    args=[
        Tensor("x", ("M", "N"), "float32", "in"),
        Tensor("y", ("M", "N"), "float32", "out"),
        Scalar("M"),
        Scalar("N"),
        Scalar("eps", "float32", value=EPS),
    ],
    reference=reference,
    vendor=vendor,
    flops=flops,
    shapes={
        "test": [{"M": 1, "N": 1}, {"M": 37, "N": 4097}, {"M": 129, "N": 33}, {"M": 6, "N": 8191}],
        "emu": [{"M": 1, "N": 1}, {"M": 37, "N": 257}, {"M": 129, "N": 33}, {"M": 3, "N": 3001}],
        "bench": [{"M": 32768, "N": 4096}],
    },
)
