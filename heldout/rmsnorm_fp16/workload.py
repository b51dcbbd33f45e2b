"""rmsnorm_fp16: RMSNorm over the last dimension with a weight, fp16 in and out, fp32 statistics:
y = x / sqrt(mean(x^2) + eps) * weight.

Held out: a new dtype of the corpus's rmsnorm family (the corpus holds bf16 only), with new
shapes. The reference computes in float64 and rounds once to fp16; tolerance: torch's fp16
defaults (fp16 keeps 3 more mantissa bits than bf16, so this is 16x tighter than the corpus).
Launcher: launch(const __half* x, const __half* weight, __half* y, int M, int N, float eps,
cudaStream_t).
"""

from __future__ import annotations

from collections.abc import Mapping

import torch
import torch.nn.functional as F

from klineage import Scalar, Tensor, Workload

EPS = 1e-5


def reference(x: torch.Tensor, weight: torch.Tensor, M: int, N: int, eps: float) -> torch.Tensor:
    xd = x.double()
    return (xd * torch.rsqrt(xd.pow(2).mean(dim=-1, keepdim=True) + eps) * weight.double()).half()


def vendor(x: torch.Tensor, weight: torch.Tensor, M: int, N: int, eps: float) -> torch.Tensor:
    return F.rms_norm(x, (N,), weight, eps)


def flops(b: Mapping[str, int]) -> float:
    return 4.0 * b["M"] * b["N"]


WORKLOAD = Workload(
    name="rmsnorm_fp16",
    description="RMSNorm forward, fp16 in/out, fp32 sum of squares",
    args=[
        Tensor("x", ("M", "N"), "float16", "in"),
        Tensor("weight", ("N",), "float16", "in"),
        Tensor("y", ("M", "N"), "float16", "out"),
        Scalar("M"),
        Scalar("N"),
        Scalar("eps", "float32", value=EPS),
    ],
    reference=reference,
    vendor=vendor,
    flops=flops,
    shapes={
        "test": [{"M": 1, "N": 1}, {"M": 41, "N": 5120}, {"M": 257, "N": 96}, {"M": 3, "N": 14337}],
        "emu": [{"M": 1, "N": 1}, {"M": 41, "N": 641}, {"M": 257, "N": 96}, {"M": 2, "N": 5121}],
        "bench": [{"M": 8192, "N": 8192}],
    },
)
