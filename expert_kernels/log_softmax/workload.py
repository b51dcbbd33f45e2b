"""log_softmax: row-wise log-softmax over the last dimension of an (M, N) matrix of fp32 rows,
y[m, n] = x[m, n] - max_m - log(sum_k exp(x[m, k] - max_m)).

Launcher: launch(const float* x, float* y, int M, int N, cudaStream_t).
The reference computes in float64 and rounds once to float32; tolerance: torch's float32 defaults.
"""

from __future__ import annotations

from collections.abc import Mapping

import torch

from klineage import Scalar, Tensor, Workload


def reference(x: torch.Tensor, M: int, N: int) -> torch.Tensor:
    return torch.log_softmax(x.double(), dim=-1).to(torch.float32)


def vendor(x: torch.Tensor, M: int, N: int) -> torch.Tensor:
    return torch.log_softmax(x, dim=-1)


def flops(b: Mapping[str, int]) -> float:
    # max, subtract, exp, sum, subtract per element
    return 5.0 * b["M"] * b["N"]


WORKLOAD = Workload(
    name="log_softmax",
    args=[
        Tensor("x", ("M", "N"), "float32", "in"),
        Tensor("y", ("M", "N"), "float32", "out"),
        Scalar("M"),
        Scalar("N"),
    ],
    reference=reference,
    shapes={
        "test": [
            {"M": 41, "N": 4099},
            {"M": 65, "N": 1000},
            {"M": 90, "N": 1},
            {"M": 131, "N": 31},
            {"M": 257, "N": 4096},
            {"M": 17, "N": 2048},
            {"M": 3, "N": 30001},
            {"M": 6, "N": 12289},
        ],
        "emu": [
            {"M": 41, "N": 1027},
            {"M": 63, "N": 31},
            {"M": 8, "N": 4096},
            {"M": 2, "N": 16384},
            {"M": 3, "N": 8195},
            {"M": 40, "N": 1},
        ],
        "bench": [{"M": 8192, "N": 8192}],
    },
    description="row-wise log-softmax, fp32 rows",
    vendor=vendor,
    flops=flops,
)
