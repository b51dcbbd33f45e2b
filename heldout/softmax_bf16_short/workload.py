"""softmax_bf16_short: row softmax of bf16 (M, N) with short rows (N <= 128) and many of them.

Held out: a new dtype and shape regime of the corpus's softmax family (the corpus holds fp32 and
fp16 softmax on long rows): here a row is smaller than a warp's natural tile or a few of them. The
reference computes in float64 and rounds once to bf16; tolerance: torch's bf16 defaults.
Launcher: launch(const __nv_bfloat16* x, __nv_bfloat16* y, int M, int N, cudaStream_t).
"""

from __future__ import annotations

from collections.abc import Mapping

import torch

from klineage import Scalar, Tensor, Workload


def reference(x: torch.Tensor, M: int, N: int) -> torch.Tensor:
    return torch.softmax(x.double(), dim=1).to(torch.bfloat16)


def vendor(x: torch.Tensor, M: int, N: int) -> torch.Tensor:
    return torch.softmax(x, dim=1)


def flops(b: Mapping[str, int]) -> float:
    return 5.0 * b["M"] * b["N"]


WORKLOAD = Workload(
    name="softmax_bf16_short",
    description="row softmax, bf16, short rows (N <= 128)",
    args=[
        Tensor("x", ("M", "N"), "bfloat16", "in"),
        Tensor("y", ("M", "N"), "bfloat16", "out"),
        Scalar("M"),
        Scalar("N"),
    ],
    reference=reference,
    vendor=vendor,
    flops=flops,
    shapes={
        "test": [{"M": 1, "N": 1}, {"M": 1000, "N": 7}, {"M": 333, "N": 100}, {"M": 4097, "N": 128},
                 {"M": 65, "N": 33}],
        "emu": [{"M": 1, "N": 1}, {"M": 1000, "N": 7}, {"M": 150, "N": 100}, {"M": 120, "N": 128},
                {"M": 65, "N": 33}],
        "bench": [{"M": 2097152, "N": 100}],
    },
)
