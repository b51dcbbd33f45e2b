"""Population variance of each row of an M x N float32 matrix (fixture of online_softmax's Welford form)."""

import torch

from klineage import Scalar, Tensor, Tolerance, Workload


def reference(x: torch.Tensor, M: int, N: int) -> torch.Tensor:
    return x.double().var(dim=1, unbiased=False).float()


WORKLOAD = Workload(
    name="row_var",
    description="Per-row population variance, float32.",
    args=[
        Tensor("x", ("M", "N"), "float32"),
        Tensor("y", ("M",), "float32", role="out"),
        Scalar("M", "int32"),
        Scalar("N", "int32"),
    ],
    reference=reference,
    tolerances={"float32": Tolerance(1e-5, 1e-4)},
    shapes={
        "test": [{"M": 1, "N": 1}, {"M": 37, "N": 1000}, {"M": 5, "N": 4099}],
        "emu": [{"M": 1, "N": 1}, {"M": 3, "N": 100}, {"M": 2, "N": 333}],
        "bench": [{"M": 8192, "N": 8192}],
    },
)
