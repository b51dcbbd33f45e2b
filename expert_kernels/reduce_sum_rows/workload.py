"""reduce_sum_rows: per-row sums of an fp32 matrix, out[m] = sum_n x[m, n].

Launcher: launch(const float* x, float* out, int M, int N, cudaStream_t).

Tolerance: torch's fp32 defaults plus the rounding a sum of N terms may gather in any order
(`Tolerance.accumulation("N")`, DESIGN.md 'Workloads'). The reference sums in float64 and rounds
once; a plain fp32 loop over a row of 4097 N(0,1) values rounds to about u*N/sqrt(6) ~ 1e-4,
beyond the defaults alone for small row sums. The kernels here accumulate in double anyway (free:
the kernel is memory-bound), so only the final rounding to fp32 remains; an fp32 tree or loop
passes too.
"""

from __future__ import annotations

from collections.abc import Mapping

import torch

from klineage import Scalar, Tensor, Tolerance, Workload


def reference(x: torch.Tensor, M: int, N: int) -> torch.Tensor:
    return x.double().sum(dim=1).to(torch.float32)


def vendor(x: torch.Tensor, M: int, N: int) -> torch.Tensor:
    return torch.sum(x, dim=1)


def flops(b: Mapping[str, int]) -> float:
    return float(b["M"] * b["N"])


WORKLOAD = Workload(
    name="reduce_sum_rows",
    args=[
        Tensor("x", ("M", "N"), "float32", "in"),
        Tensor("out", ("M",), "float32", "out"),
        Scalar("M"),
        Scalar("N"),
    ],
    reference=reference,
    shapes={
        "test": [
            {"M": 37, "N": 4097},
            {"M": 1000, "N": 1},
            {"M": 64, "N": 1000},
            {"M": 300, "N": 4096},
            {"M": 3, "N": 100_003},
            {"M": 129, "N": 33},
        ],
        "emu": [
            {"M": 37, "N": 1025},
            {"M": 61, "N": 33},
            {"M": 8, "N": 4096},
            {"M": 100, "N": 1},
        ],
        "bench": [{"M": 16384, "N": 4096}],
    },
    tolerances={"float32": Tolerance.accumulation("N")},
    description="per-row sums of an fp32 matrix (double accumulation, deterministic)",
    vendor=vendor,
    flops=flops,
)
