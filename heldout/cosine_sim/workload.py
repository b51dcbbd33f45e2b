"""cosine_sim: per-row cosine similarity of two fp32 matrices a, b (M, N):
y[m] = <a_m, b_m> / max(||a_m|| * ||b_m||, eps).

Held out: a new operator (three simultaneous row reductions over two inputs, then a combine).
The reference computes in float64 and rounds once; tolerance: torch's fp32 defaults.
Launcher: launch(const float* a, const float* b, float* y, int M, int N, float eps, cudaStream_t).
"""

from __future__ import annotations

from collections.abc import Mapping

import torch
import torch.nn.functional as F

from klineage import Scalar, Tensor, Workload

EPS = 1e-8


def reference(a: torch.Tensor, b: torch.Tensor, M: int, N: int, eps: float) -> torch.Tensor:
    ad, bd = a.double(), b.double()
    dot = (ad * bd).sum(dim=1)
    norms = ad.norm(dim=1) * bd.norm(dim=1)
    return (dot / norms.clamp_min(eps)).float()


def vendor(a: torch.Tensor, b: torch.Tensor, M: int, N: int, eps: float) -> torch.Tensor:
    return F.cosine_similarity(a, b, dim=1, eps=eps)


def flops(b: Mapping[str, int]) -> float:
    # three multiply-adds per element pair
    return 6.0 * b["M"] * b["N"]


WORKLOAD = Workload(
    name="cosine_sim",
    description="row-wise cosine similarity of two fp32 matrices",
    args=[
        Tensor("a", ("M", "N"), "float32", "in"),
        Tensor("b", ("M", "N"), "float32", "in"),
        Tensor("y", ("M",), "float32", "out"),
        Scalar("M"),
        Scalar("N"),
        Scalar("eps", "float32", value=EPS),
    ],
    reference=reference,
    vendor=vendor,
    flops=flops,
    shapes={
        "test": [{"M": 1, "N": 1}, {"M": 37, "N": 4097}, {"M": 300, "N": 17}, {"M": 6, "N": 9999}],
        "emu": [{"M": 1, "N": 1}, {"M": 37, "N": 255}, {"M": 300, "N": 17}, {"M": 2, "N": 4001}],
        "bench": [{"M": 32768, "N": 4096}],
    },
)
