"""out = in^T for a rows x cols float32 matrix (fixture of smem_staging's forward step)."""

import torch

from klineage import Scalar, Tensor, Workload


def reference(inp: torch.Tensor, rows: int, cols: int) -> torch.Tensor:
    return inp.t().contiguous()


WORKLOAD = Workload(
    name="transpose_2d_grid_fixture",
    description="2-D grid naive transpose, destination-first kernel signature.",
    args=[
        Tensor("inp", ("rows", "cols"), "float32"),
        Tensor("out", ("cols", "rows"), "float32", role="out"),
        Scalar("rows", "int32"),
        Scalar("cols", "int32"),
    ],
    reference=reference,
    shapes={
        "test": [{"rows": 1, "cols": 1}, {"rows": 33, "cols": 70}, {"rows": 256, "cols": 128}],
        "emu": [{"rows": 1, "cols": 1}, {"rows": 33, "cols": 70}, {"rows": 40, "cols": 9}],
        "bench": [{"rows": 8192, "cols": 8192}],
    },
)
