"""layernorm_fp32: LayerNorm over the last dimension with weight and bias, fp32 throughout:
y = (x - mean) / sqrt(var + eps) * weight + bias (biased variance).

Held out: a new dtype of the corpus's layernorm family (the corpus holds fp16 and bf16), which
also tightens the tolerance to torch's fp32 defaults: an output of size ~1 must be right to ~1e-5,
so statistics must be accurate, not just bf16-accurate. Rows stay <= 8193 long.
The reference computes in float64 and rounds once.
Launcher: launch(const float* x, const float* weight, const float* bias, float* y, int M, int N,
float eps, cudaStream_t).
"""

from __future__ import annotations

from collections.abc import Mapping

import torch
import torch.nn.functional as F

from klineage import Scalar, Tensor, Workload

EPS = 1e-5


def reference(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor, M: int, N: int,
              eps: float) -> torch.Tensor:
    return F.layer_norm(x.double(), (N,), weight.double(), bias.double(), eps).float()


def vendor(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor, M: int, N: int,
           eps: float) -> torch.Tensor:
    return F.layer_norm(x, (N,), weight, bias, eps)


def flops(b: Mapping[str, int]) -> float:
    return 8.0 * b["M"] * b["N"]


WORKLOAD = Workload(
    name="layernorm_fp32",
    description="LayerNorm forward, fp32 in/out",
    args=[
        Tensor("x", ("M", "N"), "float32", "in"),
        Tensor("weight", ("N",), "float32", "in"),
        Tensor("bias", ("N",), "float32", "in"),
        Tensor("y", ("M", "N"), "float32", "out"),
        Scalar("M"),
        Scalar("N"),
        Scalar("eps", "float32", value=EPS),
    ],
    reference=reference,
    vendor=vendor,
    flops=flops,
    shapes={
        "test": [{"M": 1, "N": 1}, {"M": 37, "N": 4097}, {"M": 300, "N": 48}, {"M": 5, "N": 8193}],
        "emu": [{"M": 1, "N": 1}, {"M": 37, "N": 385}, {"M": 300, "N": 48}, {"M": 2, "N": 4097}],
        "bench": [{"M": 32768, "N": 4096}],
    },
)
