"""Rows divided by their L1 norm, float32 (fixture of vectorize's packed row loops: odd row lengths
misalign every other row, which must take the scalar path)."""

import torch

from klineage import Scalar, Tensor, Workload


def reference(x: torch.Tensor, rows: int, cols: int) -> torch.Tensor:
    return x / x.abs().sum(dim=1, keepdim=True).clamp_min(1e-12)


WORKLOAD = Workload(
    name="l1_normalize_rows",
    description="out = x / sum(|x|) per row, float32, any shape.",
    args=[
        Tensor("x", ("rows", "cols"), "float32"),
        Tensor("out", ("rows", "cols"), "float32", role="out"),
        Scalar("rows", "int32"),
        Scalar("cols", "int32"),
    ],
    reference=reference,
    shapes={
        "test": [{"rows": 1, "cols": 1}, {"rows": 7, "cols": 1001}, {"rows": 3, "cols": 4096}],
        "emu": [{"rows": 1, "cols": 1}, {"rows": 3, "cols": 37}, {"rows": 2, "cols": 1030}],
        "bench": [{"rows": 8192, "cols": 8192}],
    },
)
