"""gelu_bias: y = gelu(x + bias) (exact erf GELU), x (M, N) fp16, bias (N,) fp16, fp16 out.

Held out: a new operator (a broadcast add fused with an activation). The reference computes in
float64 and rounds once to fp16; tolerance: torch's fp16 defaults (one fp16 rounding is at most
2^-11 relative, and fp32 math inside the kernel adds ~1e-7).
Launcher: launch(const __half* x, const __half* bias, __half* y, int M, int N, cudaStream_t).
"""

from __future__ import annotations

from collections.abc import Mapping

import torch
import torch.nn.functional as F

from klineage import Scalar, Tensor, Workload


def reference(x: torch.Tensor, bias: torch.Tensor, M: int, N: int) -> torch.Tensor:
    return F.gelu(x.double() + bias.double()).half()


def vendor(x: torch.Tensor, bias: torch.Tensor, M: int, N: int) -> torch.Tensor:
    return F.gelu(x + bias)


def flops(b: Mapping[str, int]) -> float:
    # add, erf (~10), scale and multiply per element
    return 14.0 * b["M"] * b["N"]


WORKLOAD = Workload(
    name="gelu_bias",
    description="bias add fused with exact GELU, fp16",
    args=[
        Tensor("x", ("M", "N"), "float16", "in"),
        Tensor("bias", ("N",), "float16", "in"),
        Tensor("y", ("M", "N"), "float16", "out"),
        Scalar("M"),
        Scalar("N"),
    ],
    reference=reference,
    vendor=vendor,
    flops=flops,
    shapes={
        "test": [{"M": 1, "N": 1}, {"M": 37, "N": 4097}, {"M": 1000, "N": 3}, {"M": 8, "N": 5001}],
        "emu": [{"M": 1, "N": 1}, {"M": 37, "N": 515}, {"M": 1000, "N": 3}, {"M": 3, "N": 1025}],
        "bench": [{"M": 32768, "N": 8192}],
    },
)
