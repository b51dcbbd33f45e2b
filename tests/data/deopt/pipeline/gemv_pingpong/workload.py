"""y = A x for fp32 A (M x K) (fixture of the pipeline operator)."""

import torch

from klineage import Scalar, Tensor, Workload
from klineage.workload import Tolerance


def reference(A: torch.Tensor, x: torch.Tensor, M: int, K: int) -> torch.Tensor:
    return (A.double() @ x.double()).float()


WORKLOAD = Workload(
    name="gemv_pingpong",
    description="y = A x, fp32.",
    args=[
        Tensor("A", ("M", "K"), "float32"),
        Tensor("x", ("K",), "float32"),
        Tensor("y", ("M",), "float32", role="out", tolerance=Tolerance(1e-4, 1e-4)),
        Scalar("M", "int32"),
        Scalar("K", "int32"),
    ],
    reference=reference,
    shapes={
        "test": [{"M": 1, "K": 1}, {"M": 70, "K": 200}, {"M": 256, "K": 64}],
        "emu": [{"M": 1, "K": 1}, {"M": 70, "K": 200}, {"M": 65, "K": 64}],
        "bench": [{"M": 65536, "K": 4096}],
    },
)
