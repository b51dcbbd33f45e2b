"""Per-row sum of a float32 matrix: y[m] = sum_n x[m, n]."""

import torch

from klineage import Scalar, Tensor, Tolerance, Workload


def reference(x: torch.Tensor, M: int, N: int) -> torch.Tensor:
    return x.double().sum(dim=1).float()


def vendor(x: torch.Tensor, M: int, N: int) -> torch.Tensor:
    return x.sum(dim=1)


WORKLOAD = Workload(
    name="row_sum",
    description="Per-row sum of an M x N float32 matrix.",
    args=[
        Tensor("x", ("M", "N"), "float32", role="in"),
        Tensor("y", ("M",), "float32", role="out"),
        Scalar("M", "int32"),
        Scalar("N", "int32"),
    ],
    reference=reference,
    vendor=vendor,
    # each y[m] sums N terms in an order the kernel chooses: the rounding that may gather is allowed
    tolerances={"float32": Tolerance.accumulation("N")},
    shapes={
        "test": [{"M": 1, "N": 1}, {"M": 37, "N": 1000}, {"M": 5, "N": 4099}, {"M": 64, "N": 256}],
        "emu": [{"M": 1, "N": 1}, {"M": 7, "N": 1001}, {"M": 33, "N": 260}],
        "bench": [{"M": 8192, "N": 8192}],
    },
)
