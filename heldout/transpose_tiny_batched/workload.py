"""transpose_tiny_batched: transpose each of B tiny fp32 matrices, x (B, R, C) -> y (B, C, R),
with R, C <= 32 (e.g. 3x5 or 7x9 blocks) and B in the millions.

Held out: a new shape regime of the corpus's batched transpose family: a single matrix is smaller
than one tile, so tiling per matrix wastes the block; the work must be spread across matrices.
Exact.
Launcher: launch(const float* x, float* y, int B, int R, int C, cudaStream_t).
"""

from __future__ import annotations

import torch

from klineage import Scalar, Tensor, Tolerance, Workload


def reference(x: torch.Tensor, B: int, R: int, C: int) -> torch.Tensor:
    return x.transpose(1, 2).contiguous()


def vendor(x: torch.Tensor, B: int, R: int, C: int) -> torch.Tensor:
    return x.transpose(1, 2).contiguous()


WORKLOAD = Workload(
    name="transpose_tiny_batched",
    description="batched transpose of tiny fp32 matrices (R, C <= 32)",
    args=[
        Tensor("x", ("B", "R", "C"), "float32", "in"),
        Tensor("y", ("B", "C", "R"), "float32", "out"),
        Scalar("B"),
        Scalar("R"),
        Scalar("C"),
    ],
    reference=reference,
    vendor=vendor,
    tolerances={"float32": Tolerance(0.0, 0.0)},
    shapes={
        "test": [{"B": 1, "R": 1, "C": 1}, {"B": 1001, "R": 3, "C": 5}, {"B": 257, "R": 7, "C": 9},
                 {"B": 33, "R": 32, "C": 31}],
        "emu": [{"B": 1, "R": 1, "C": 1}, {"B": 1001, "R": 3, "C": 5}, {"B": 200, "R": 7, "C": 9},
                {"B": 9, "R": 32, "C": 31}],
        "bench": [{"B": 4194304, "R": 5, "C": 7}],
    },
)
