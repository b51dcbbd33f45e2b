"""axpy: z = alpha * x + y over fp32 vectors of length N (torch.add with alpha), alpha = -1.75.

Held out: a new operator (a streaming two-input elementwise op with a scalar). The reference
computes in float64 and rounds once; tolerance: torch's fp32 defaults.
Launcher: launch(const float* x, const float* y, float* z, int N, float alpha, cudaStream_t).
"""

from __future__ import annotations

from collections.abc import Mapping

import torch

from klineage import Scalar, Tensor, Workload

ALPHA = -1.75


def reference(x: torch.Tensor, y: torch.Tensor, N: int, alpha: float) -> torch.Tensor:
    return (alpha * x.double() + y.double()).float()


def vendor(x: torch.Tensor, y: torch.Tensor, N: int, alpha: float) -> torch.Tensor:
    return torch.add(y, x, alpha=alpha)


def flops(b: Mapping[str, int]) -> float:
    return 2.0 * b["N"]


WORKLOAD = Workload(
    name="axpy",
    description="z = alpha * x + y, fp32",
    args=[
        Tensor("x", ("N",), "float32", "in"),
        Tensor("y", ("N",), "float32", "in"),
        Tensor("z", ("N",), "float32", "out"),
        Scalar("N"),
        Scalar("alpha", "float32", value=ALPHA),
    ],
    reference=reference,
    vendor=vendor,
    flops=flops,
    shapes={
        "test": [{"N": 1}, {"N": 4097}, {"N": 100003}, {"N": (1 << 20) + 3}],
        "emu": [{"N": 1}, {"N": 33}, {"N": 4097}, {"N": 16387}],
        "bench": [{"N": 1 << 27}],
    },
)
