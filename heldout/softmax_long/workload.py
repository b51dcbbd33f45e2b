"""softmax_long: row softmax of fp32 (M, N) with very long rows (N up to 2^17) and few of them.

Held out: a new shape regime of the corpus's fp32 softmax family: a row no longer fits one block's
registers or shared memory, and there are too few rows to fill the GPU with one block per row.
The reference computes in float64 and rounds once; tolerance: torch's fp32 defaults (outputs are
~1/N, below atol; the check is effectively absolute).
Launcher: launch(const float* x, float* y, int M, int N, cudaStream_t).
"""

from __future__ import annotations

from collections.abc import Mapping

import torch

from klineage import Scalar, Tensor, Workload


def reference(x: torch.Tensor, M: int, N: int) -> torch.Tensor:
    return torch.softmax(x.double(), dim=1).float()


def vendor(x: torch.Tensor, M: int, N: int) -> torch.Tensor:
    return torch.softmax(x, dim=1)


def flops(b: Mapping[str, int]) -> float:
    return 5.0 * b["M"] * b["N"]


WORKLOAD = Workload(
    name="softmax_long",
    description="row softmax, fp32, very long rows (N up to 2^17), few rows",
    args=[
        Tensor("x", ("M", "N"), "float32", "in"),
        Tensor("y", ("M", "N"), "float32", "out"),
        Scalar("M"),
        Scalar("N"),
    ],
    reference=reference,
    vendor=vendor,
    flops=flops,
    shapes={
        "test": [{"M": 1, "N": 1}, {"M": 3, "N": 65537}, {"M": 2, "N": 131072}, {"M": 17, "N": 32771}],
        "emu": [{"M": 1, "N": 1}, {"M": 1, "N": 32771}, {"M": 3, "N": 10007}],
        "bench": [{"M": 512, "N": 131072}],
    },
)
