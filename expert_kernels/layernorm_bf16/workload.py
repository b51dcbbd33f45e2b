"""layernorm_bf16: LayerNorm forward over the last dimension with weight and bias, bf16 in and out,
fp32 statistics: y = (x - mean) / sqrt(var + eps) * weight + bias (biased variance).

Launcher: launch(const __nv_bfloat16* x, const __nv_bfloat16* weight, const __nv_bfloat16* bias, __nv_bfloat16* y, int M, int N,
float eps, cudaStream_t). The reference computes in float64 and rounds once to bfloat16;
tolerance: torch's bfloat16 defaults.
"""

from __future__ import annotations

from collections.abc import Mapping

import torch
import torch.nn.functional as F

from klineage import Scalar, Tensor, Workload

EPS = 1e-5


def reference(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor, M: int, N: int, eps: float) -> torch.Tensor:
    y = F.layer_norm(x.double(), (N,), weight.double(), bias.double(), eps)
    return y.to(torch.bfloat16)


def vendor(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor, M: int, N: int, eps: float) -> torch.Tensor:
    return F.layer_norm(x, (N,), weight, bias, eps)


def flops(b: Mapping[str, int]) -> float:
    # mean, variance, normalize, scale and shift per element
    return 8.0 * b["M"] * b["N"]


WORKLOAD = Workload(
    name="layernorm_bf16",
    args=[
        Tensor("x", ("M", "N"), "bfloat16", "in"),
        Tensor("weight", ("N",), "bfloat16", "in"),
        Tensor("bias", ("N",), "bfloat16", "in"),
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
    description="LayerNorm forward, bf16 in/out, fp32 statistics",
    vendor=vendor,
    flops=flops,
)
