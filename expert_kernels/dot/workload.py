"""dot: the inner product of two large fp32 vectors, as one fp32 value.

Launcher: launch(const float* x, const float* y, float* out, double* partials, int N, cudaStream_t).
`partials` is scratch for a deterministic two-pass reduction (per-block partial sums, then one
block adds them in a fixed order); kernels that need no scratch ignore it.

Tolerance: torch's fp32 defaults. The reference multiplies and adds in float64 and rounds once.
A plain fp32 loop over 4097 products of N(0,1) values rounds to about u*N/sqrt(6) ~ 1e-4 -- beyond
those defaults -- so the kernels here widen each operand to double before multiplying (the
product of two floats is exact in double) and add in double; the kernel is memory-bound, so the
double arithmetic costs nothing measurable on an H200. Only the final rounding to fp32 remains.
"""

from __future__ import annotations

from collections.abc import Mapping

import torch

from klineage import Scalar, Tensor, Workload

#: length of the scratch array; the expert's first pass launches at most this many blocks
MAX_PARTIALS = 2048


def reference(x: torch.Tensor, y: torch.Tensor, N: int) -> torch.Tensor:
    return torch.dot(x.double(), y.double()).reshape(1).to(torch.float32)


def vendor(x: torch.Tensor, y: torch.Tensor, N: int) -> torch.Tensor:
    return torch.dot(x, y).reshape(1)


def flops(b: Mapping[str, int]) -> float:
    return 2.0 * b["N"]


WORKLOAD = Workload(
    name="dot",
    args=[
        Tensor("x", ("N",), "float32", "in"),
        Tensor("y", ("N",), "float32", "in"),
        Tensor("out", (1,), "float32", "out"),
        Tensor("partials", (MAX_PARTIALS,), "float64", "scratch"),
        Scalar("N"),
    ],
    reference=reference,
    shapes={
        "test": [{"N": 1}, {"N": 5}, {"N": 4099}, {"N": 1_000_001}, {"N": (1 << 22) + 3}],
        "emu": [{"N": 1}, {"N": 4099}, {"N": 32_771}],
        "bench": [{"N": 1 << 27}],
    },
    description="inner product of two fp32 vectors (deterministic: double accumulation, fixed order)",
    vendor=vendor,
    flops=flops,
)
