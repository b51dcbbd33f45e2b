"""argmax: per-row index of the largest value of an (M, N) fp32 matrix, int64 out; on ties the
first (smallest) index wins, as torch.argmax documents.

Held out: a new operator (an index-carrying reduction). Indices compare exactly.
Launcher: launch(const float* x, long long* idx, int M, int N, cudaStream_t).
"""

from __future__ import annotations

import torch

from klineage import Scalar, Tensor, Workload


def reference(x: torch.Tensor, M: int, N: int) -> torch.Tensor:
    # first maximum: the largest value, then the smallest column holding it
    best = x.max(dim=1, keepdim=True).values
    cols = torch.arange(N, device=x.device).expand(M, N)
    return torch.where(x == best, cols, N).min(dim=1).values.to(torch.int64)


def vendor(x: torch.Tensor, M: int, N: int) -> torch.Tensor:
    return torch.argmax(x, dim=1)


def _ties(shape: tuple[int, ...], dtype: torch.dtype, gen: torch.Generator) -> torch.Tensor:
    """Signed values on a coarse grid (multiples of 1/8 in [-8, 8)) so rows hold tied maxima."""
    return (torch.randint(-64, 64, shape, generator=gen).to(torch.float32) / 8).to(dtype)


WORKLOAD = Workload(
    name="argmax",
    description="per-row argmax of fp32 rows (first index on ties), int64 indices",
    args=[
        Tensor("x", ("M", "N"), "float32", "in", init=_ties),
        Tensor("idx", ("M",), "int64", "out"),
        Scalar("M"),
        Scalar("N"),
    ],
    reference=reference,
    vendor=vendor,
    shapes={
        "test": [{"M": 1, "N": 1}, {"M": 37, "N": 4097}, {"M": 257, "N": 31}, {"M": 3, "N": 20001}],
        "emu": [{"M": 1, "N": 1}, {"M": 37, "N": 513}, {"M": 257, "N": 31}, {"M": 2, "N": 6007}],
        "bench": [{"M": 65536, "N": 4096}],
    },
)
