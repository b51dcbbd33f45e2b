"""rmsnorm: RMSNorm forward over the last dimension with a weight, bf16 in and out:
y = x / sqrt(mean(x^2) + eps) * weight.

Launcher: launch(const __nv_bfloat16* x, const __nv_bfloat16* weight, __nv_bfloat16* y, int M,
int N, float eps, cudaStream_t). The reference computes in float64 and rounds once to bf16;
tolerance: torch's bf16 defaults (rtol 1.6e-2: two bf16 roundings, 2 * 2^-8, fit inside).
"""

from __future__ import annotations

from collections.abc import Mapping

import torch
import torch.nn.functional as F

from klineage import Scalar, Tensor, Workload

EPS = 1e-6


def reference(x: torch.Tensor, weight: torch.Tensor, M: int, N: int, eps: float) -> torch.Tensor:
    xd = x.double()
    y = xd * torch.rsqrt(xd.pow(2).mean(dim=-1, keepdim=True) + eps) * weight.double()
    return y.to(torch.bfloat16)


def vendor(x: torch.Tensor, weight: torch.Tensor, M: int, N: int, eps: float) -> torch.Tensor:
    return F.rms_norm(x, (N,), weight, eps)


def flops(b: Mapping[str, int]) -> float:
    # square-accumulate, scale, weight per element
    return 4.0 * b["M"] * b["N"]


WORKLOAD = Workload(
    name="rmsnorm",
    args=[
        Tensor("x", ("M", "N"), "bfloat16", "in"),
        Tensor("weight", ("N",), "bfloat16", "in"),
        Tensor("y", ("M", "N"), "bfloat16", "out"),
        Scalar("M"),
        Scalar("N"),
        Scalar("eps", "float32", value=EPS),
    ],
    reference=reference,
    shapes={
        "test": [
            {"M": 37, "N": 4097},
            {"M": 64, "N": 1000},
            {"M": 100, "N": 1},
            {"M": 129, "N": 33},
            {"M": 1000, "N": 4096},
            {"M": 16, "N": 2048},
            {"M": 7, "N": 8192},
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
        "bench": [{"M": 16384, "N": 4096}],
    },
    description="RMSNorm forward, bf16 in/out, fp32 sum of squares",
    vendor=vendor,
    flops=flops,
)
