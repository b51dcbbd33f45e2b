"""topk: per-row top-k of an (M, N) fp32 matrix, k <= 64: values and int64 indices, sorted by
value descending; ties broken by the smaller index first (the reference is a stable descending
sort, so the order is fully defined and indices compare exactly).

Launcher: launch(const float* x, float* values, long long* indices, int M, int N, int K,
cudaStream_t). Preconditions: 1 <= K <= 64, K <= N. Values are copies of inputs: exact.
"""

from __future__ import annotations

import torch

from klineage import Scalar, Tensor, Tolerance, Workload


def reference(x: torch.Tensor, M: int, N: int, K: int) -> dict[str, torch.Tensor]:
    v, i = torch.sort(x, dim=-1, descending=True, stable=True)
    return {"values": v[:, :K].contiguous(), "indices": i[:, :K].contiguous()}


def vendor(x: torch.Tensor, M: int, N: int, K: int) -> tuple[torch.Tensor, torch.Tensor]:
    return torch.topk(x, K, dim=-1, largest=True, sorted=True)


WORKLOAD = Workload(
    name="topk",
    args=[
        Tensor("x", ("M", "N"), "float32", "in"),
        Tensor("values", ("M", "K"), "float32", "out"),
        Tensor("indices", ("M", "K"), "int64", "out"),
        Scalar("M"),
        Scalar("N"),
        Scalar("K"),
    ],
    reference=reference,
    shapes={
        "test": [
            {"M": 37, "N": 4097, "K": 64},
            {"M": 64, "N": 4096, "K": 1},
            {"M": 5, "N": 4096, "K": 64},
            {"M": 3, "N": 8191, "K": 17},
            {"M": 2, "N": 16384, "K": 33},
            {"M": 2, "N": 20000, "K": 64},
            {"M": 1, "N": 100_003, "K": 5},
        ],
        "emu": [
            {"M": 4, "N": 4096, "K": 64},
            {"M": 3, "N": 4097, "K": 7},
            {"M": 2, "N": 8192, "K": 1},
            {"M": 1, "N": 20000, "K": 33},
        ],
        "bench": [{"M": 8192, "N": 4096, "K": 64}],
    },
    tolerances={"float32": Tolerance(0.0, 0.0)},
    description="per-row top-k values and indices of fp32 rows (k <= 64), ties by smaller index",
    vendor=vendor,
)
