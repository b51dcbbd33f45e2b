"""add_rmsnorm: fused residual add + RMSNorm, fp16: h = x + residual (rounded to fp16, returned as
the new residual), y = h / sqrt(mean(h^2) + eps) * weight.

Held out: a new operator (a fusion of an elementwise add into a row normalization, two outputs).
The reference rounds h to fp16 exactly as the kernel must, then computes y in float64 and rounds
once; tolerance: torch's fp16 defaults.
Launcher: launch(const __half* x, const __half* residual, const __half* weight, __half* h,
__half* y, int M, int N, float eps, cudaStream_t).
"""

from __future__ import annotations

from collections.abc import Mapping

import torch
import torch.nn.functional as F

from klineage import Scalar, Tensor, Workload

EPS = 1e-6


def reference(x: torch.Tensor, residual: torch.Tensor, weight: torch.Tensor, M: int, N: int,
              eps: float) -> dict[str, torch.Tensor]:
    h = (x.double() + residual.double()).half()
    hd = h.double()
    y = hd * torch.rsqrt(hd.pow(2).mean(dim=-1, keepdim=True) + eps) * weight.double()
    return {"h": h, "y": y.half()}


def vendor(x: torch.Tensor, residual: torch.Tensor, weight: torch.Tensor, M: int, N: int,
           eps: float) -> tuple[torch.Tensor, torch.Tensor]:
    h = x + residual
    return h, F.rms_norm(h, (N,), weight, eps)


def flops(b: Mapping[str, int]) -> float:
    # add, square-accumulate, scale, weight per element
    return 5.0 * b["M"] * b["N"]


WORKLOAD = Workload(
    name="add_rmsnorm",
    description="residual add fused with RMSNorm, fp16, returns the sum and the normalized rows",
    args=[
        Tensor("x", ("M", "N"), "float16", "in"),
        Tensor("residual", ("M", "N"), "float16", "in"),
        Tensor("weight", ("N",), "float16", "in"),
        Tensor("h", ("M", "N"), "float16", "out"),
        Tensor("y", ("M", "N"), "float16", "out"),
        Scalar("M"),
        Scalar("N"),
        Scalar("eps", "float32", value=EPS),
    ],
    reference=reference,
    vendor=vendor,
    flops=flops,
    shapes={
        "test": [{"M": 1, "N": 1}, {"M": 37, "N": 4097}, {"M": 129, "N": 33}, {"M": 4, "N": 8193}],
        "emu": [{"M": 1, "N": 1}, {"M": 37, "N": 263}, {"M": 129, "N": 33}, {"M": 3, "N": 2049}],
        "bench": [{"M": 16384, "N": 4096}],
    },
)
