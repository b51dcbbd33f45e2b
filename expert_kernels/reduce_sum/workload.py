"""reduce_sum: the sum of a large fp32 vector, as one fp32 value.

Launcher: launch(const float* x, float* out, double* partials, int N, cudaStream_t).
`partials` is scratch for a deterministic two-pass reduction (per-block partial sums, then one
block sums them in a fixed order); kernels that need no scratch ignore it.

Tolerance: torch's fp32 defaults. The reference sums in float64 and rounds once. A plain fp32
loop over 4097 N(0,1) values rounds to about u*N/sqrt(6) ~ 1e-4 -- beyond those defaults -- so
the kernels here accumulate in double (the sum is memory-bound: the conversions and double adds
are free on an H200), and only the final rounding to fp32 (0.5 ulp, 6e-8 relative) remains.
"""

from __future__ import annotations

from collections.abc import Mapping

import torch

from klineage import Scalar, Tensor, Workload

#: length of the scratch array; the expert's first pass launches at most this many blocks
MAX_PARTIALS = 2048


def reference(x: torch.Tensor, N: int) -> torch.Tensor:
    return x.double().sum().reshape(1).to(torch.float32)


def vendor(x: torch.Tensor, N: int) -> torch.Tensor:
    return torch.sum(x).reshape(1)


def flops(b: Mapping[str, int]) -> float:
    return float(b["N"])


WORKLOAD = Workload(
    name="reduce_sum",
    args=[
        Tensor("x", ("N",), "float32", "in"),
        Tensor("out", (1,), "float32", "out"),
        Tensor("partials", (MAX_PARTIALS,), "float64", "scratch"),
        Scalar("N"),
    ],
    reference=reference,
    shapes={
        "test": [{"N": 1}, {"N": 3}, {"N": 4097}, {"N": 1_000_003}, {"N": (1 << 22) + 4}],
        "emu": [{"N": 1}, {"N": 4097}, {"N": 65_537}],
        "bench": [{"N": 1 << 28}],
    },
    description="sum of an fp32 vector (deterministic: double accumulation, fixed reduction order)",
    vendor=vendor,
    flops=flops,
)
