"""layernorm: LayerNorm forward over the last dimension with weight and bias, fp16 in and out,
fp32 statistics: y = (x - mean) / sqrt(var + eps) * weight + bias (biased variance).

Launcher: launch(const __half* x, const __half* weight, const __half* bias, __half* y, int M, int N,
float eps, cudaStream_t). The reference computes in float64 and rounds once to float16;
tolerance: torch's float16 defaults.
"""

from __future__ import annotations

from collections.abc import Mapping

import torch
import torch.nn.functional as F

from klineage import Scalar, Tensor, Workload

EPS = 1e-5


def reference(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor, M: int, N: int, eps: float) -> torch.Tensor:
    y = F.layer_norm(x.double(), (N,), weight.double(), bias.double(), eps)
    return y.to(torch.float16)


def vendor(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor, M: int, N: int, eps: float) -> torch.Tensor:
    return F.layer_norm(x, (N,), weight, bias, eps)


def flops(b: Mapping[str, int]) -> float:
    # mean, variance, normalize, scale and shift per element
    return 8.0 * b["M"] * b["N"]


WORKLOAD = Workload(
    name="layernorm",
    args=[
        Tensor("x", ("M", "N"), "float16", "in"),
        Tensor("weight", ("N",), "float16", "in"),
        Tensor("bias", ("N",), "float16", "in"),
        Tensor("y", ("M", "N"), "float16", "out"),
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
    description="LayerNorm forward, fp16 in/out, fp32 statistics",
    vendor=vendor,
    flops=flops,
)
