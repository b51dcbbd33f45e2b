"""swiglu: y = silu(gate) * up, gate and up (M, N) bf16, bf16 out (the SwiGLU MLP activation).

Held out: a new operator (a two-input elementwise gate). The reference computes in float64 and
rounds once to bf16; tolerance: torch's bf16 defaults.
Launcher: launch(const __nv_bfloat16* gate, const __nv_bfloat16* up, __nv_bfloat16* y, int M, int N,
cudaStream_t).
"""

from __future__ import annotations

from collections.abc import Mapping

import torch
import torch.nn.functional as F

from klineage import Scalar, Tensor, Workload


def reference(gate: torch.Tensor, up: torch.Tensor, M: int, N: int) -> torch.Tensor:
    return (F.silu(gate.double()) * up.double()).to(torch.bfloat16)


def vendor(gate: torch.Tensor, up: torch.Tensor, M: int, N: int) -> torch.Tensor:
    return F.silu(gate) * up


def flops(b: Mapping[str, int]) -> float:
    # exp, add, divide, two multiplies per element
    return 5.0 * b["M"] * b["N"]


WORKLOAD = Workload(
    name="swiglu",
    description="SiLU(gate) * up, bf16",
    args=[
        Tensor("gate", ("M", "N"), "bfloat16", "in"),
        Tensor("up", ("M", "N"), "bfloat16", "in"),
        Tensor("y", ("M", "N"), "bfloat16", "out"),
        Scalar("M"),
        Scalar("N"),
    ],
    reference=reference,
    vendor=vendor,
    flops=flops,
    shapes={
        "test": [{"M": 1, "N": 1}, {"M": 37, "N": 4097}, {"M": 333, "N": 7}, {"M": 5, "N": 11009}],
        "emu": [{"M": 1, "N": 1}, {"M": 37, "N": 519}, {"M": 333, "N": 7}, {"M": 2, "N": 3001}],
        "bench": [{"M": 16384, "N": 11008}],
    },
)
