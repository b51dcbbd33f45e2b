"""row_max: the largest value of each row of an fp32 matrix, out[m] = max_n x[m, n].

Launcher: launch(const float* x, float* out, int M, int N, cudaStream_t). Exact: a maximum is one
of its inputs, in any order of comparison (the inputs hold no NaN).
"""

from __future__ import annotations

from collections.abc import Mapping

import torch

from klineage import Scalar, Tensor, Tolerance, Workload


def reference(x: torch.Tensor, M: int, N: int) -> torch.Tensor:
    return torch.amax(x, dim=1)


def vendor(x: torch.Tensor, M: int, N: int) -> torch.Tensor:
    return torch.amax(x, dim=1)


def flops(b: Mapping[str, int]) -> float:
    return float(b["M"] * b["N"])


WORKLOAD = Workload(
    name="row_max",
    args=[
        Tensor("x", ("M", "N"), "float32", "in"),
        Tensor("out", ("M",), "float32", "out"),
        Scalar("M"),
        Scalar("N"),
    ],
    reference=reference,
    shapes={
        "test": [
            {"M": 41, "N": 4099},
            {"M": 1000, "N": 1},
            {"M": 65, "N": 1000},
            {"M": 257, "N": 4096},
            {"M": 3, "N": 100_001},
            {"M": 131, "N": 31},
        ],
        "emu": [
            {"M": 41, "N": 1027},
            {"M": 63, "N": 31},
            {"M": 8, "N": 4096},
            {"M": 90, "N": 1},
        ],
        "bench": [{"M": 16384, "N": 4096}],
    },
    tolerances={"float32": Tolerance(0.0, 0.0)},
    description="per-row maximum of an fp32 matrix",
    vendor=vendor,
    flops=flops,
)
