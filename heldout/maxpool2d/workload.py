"""maxpool2d: 2-D max pooling, kernel 3, stride 2, padding 1, over fp32 NCHW x (B, C, H, W);
out (B, C, OH, OW) with OH = (H - 1)//2 + 1, OW = (W - 1)//2 + 1 (F.max_pool2d).

Held out: a new operator (a windowed 2-D stencil with padding). Values are copies: exact.
Launcher: launch(const float* x, float* y, int B, int C, int H, int W, int OH, int OW, cudaStream_t).
"""

from __future__ import annotations

from collections.abc import Mapping

import torch
import torch.nn.functional as F

from klineage import Scalar, Tensor, Tolerance, Workload


def reference(x: torch.Tensor, B: int, C: int, H: int, W: int, OH: int, OW: int) -> torch.Tensor:
    return F.max_pool2d(x, kernel_size=3, stride=2, padding=1)


def vendor(x: torch.Tensor, B: int, C: int, H: int, W: int, OH: int, OW: int) -> torch.Tensor:
    return F.max_pool2d(x, kernel_size=3, stride=2, padding=1)


def flops(b: Mapping[str, int]) -> float:
    # nine comparisons per output
    return 9.0 * b["B"] * b["C"] * ((b["H"] - 1) // 2 + 1) * ((b["W"] - 1) // 2 + 1)


WORKLOAD = Workload(
    name="maxpool2d",
    description="max pooling 3x3, stride 2, padding 1, fp32 NCHW",
    args=[
        Tensor("x", ("B", "C", "H", "W"), "float32", "in"),
        Tensor("y", ("B", "C", "(H - 1)//2 + 1", "(W - 1)//2 + 1"), "float32", "out"),
        Scalar("B"),
        Scalar("C"),
        Scalar("H"),
        Scalar("W"),
        Scalar("OH", expr="(H - 1)//2 + 1"),
        Scalar("OW", expr="(W - 1)//2 + 1"),
    ],
    reference=reference,
    vendor=vendor,
    flops=flops,
    tolerances={"float32": Tolerance(0.0, 0.0)},
    shapes={
        "test": [{"B": 1, "C": 1, "H": 1, "W": 1}, {"B": 2, "C": 3, "H": 37, "W": 129},
                 {"B": 4, "C": 64, "H": 14, "W": 14}, {"B": 1, "C": 5, "H": 224, "W": 223}],
        "emu": [{"B": 1, "C": 1, "H": 1, "W": 1}, {"B": 2, "C": 3, "H": 37, "W": 61},
                {"B": 2, "C": 16, "H": 14, "W": 14}, {"B": 1, "C": 1, "H": 112, "W": 111}],
        "bench": [{"B": 64, "C": 128, "H": 112, "W": 112}],
    },
)
