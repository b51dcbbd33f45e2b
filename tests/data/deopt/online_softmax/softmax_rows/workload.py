"""Row softmax of an M x N float32 matrix (fixture of the online_softmax operator)."""

import torch

from klineage import Scalar, Tensor, Tolerance, Workload


def reference(x: torch.Tensor, M: int, N: int) -> torch.Tensor:
    return torch.softmax(x.double(), dim=1).float()


WORKLOAD = Workload(
    name="softmax_rows",
    description="Row softmax, float32.",
    args=[
        Tensor("x", ("M", "N"), "float32"),
        Tensor("y", ("M", "N"), "float32", role="out"),
        Scalar("M", "int32"),
        Scalar("N", "int32"),
    ],
    reference=reference,
    tolerances={"float32": Tolerance(1e-6, 1e-4)},
    shapes={
        "test": [{"M": 1, "N": 1}, {"M": 37, "N": 1000}, {"M": 5, "N": 4099}],
        "emu": [{"M": 1, "N": 1}, {"M": 3, "N": 100}, {"M": 2, "N": 700}],
        "bench": [{"M": 4096, "N": 32768}],
    },
)
