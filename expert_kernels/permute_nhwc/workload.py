"""permute_nhwc: an fp32 activation from NCHW to NHWC, y[b, h, w, c] = x[b, c, h, w].

Launcher: launch(const float* x, float* y, int B, int C, int H, int W, cudaStream_t). Exact (a
copy). Each image is a (C, H*W) matrix written transposed, so the reads of one element order are
the strided writes of the other. Precondition: B <= 65535 (one grid z-slice per image).
"""

from __future__ import annotations

import torch

from klineage import Scalar, Tensor, Tolerance, Workload


def reference(x: torch.Tensor, B: int, C: int, H: int, W: int) -> torch.Tensor:
    return x.permute(0, 2, 3, 1).contiguous()


def vendor(x: torch.Tensor, B: int, C: int, H: int, W: int) -> torch.Tensor:
    return x.permute(0, 2, 3, 1).contiguous()


WORKLOAD = Workload(
    name="permute_nhwc",
    args=[
        Tensor("x", ("B", "C", "H", "W"), "float32", "in"),
        Tensor("y", ("B", "H", "W", "C"), "float32", "out"),
        Scalar("B"),
        Scalar("C"),
        Scalar("H"),
        Scalar("W"),
    ],
    reference=reference,
    shapes={
        "test": [
            {"B": 2, "C": 3, "H": 37, "W": 41},
            {"B": 1, "C": 1, "H": 1, "W": 1},
            {"B": 4, "C": 64, "H": 14, "W": 14},
            {"B": 3, "C": 129, "H": 7, "W": 9},
            {"B": 1, "C": 512, "H": 33, "W": 31},
            {"B": 5, "C": 1000, "H": 1, "W": 1},
        ],
        "emu": [
            {"B": 2, "C": 3, "H": 17, "W": 19},
            {"B": 1, "C": 1, "H": 1, "W": 1},
            {"B": 2, "C": 64, "H": 8, "W": 8},
            {"B": 3, "C": 33, "H": 5, "W": 7},
        ],
        "bench": [{"B": 32, "C": 256, "H": 56, "W": 56}],
    },
    tolerances={"float32": Tolerance(0.0, 0.0)},
    description="fp32 NCHW to NHWC permute (a batched transpose of C x HW)",
    vendor=vendor,
)
