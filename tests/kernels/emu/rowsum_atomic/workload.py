"""Row sums where the kernel may combine partials with float atomics (order not deterministic)."""

import torch

from klineage import Scalar, Tensor, Tolerance, Workload


def reference(x: torch.Tensor, M: int, N: int) -> torch.Tensor:
    return x.double().sum(dim=1).float()


WORKLOAD = Workload(
    name="emu_rowsum_atomic",
    args=[Tensor("x", ("M", "N")), Tensor("y", ("M",), role="out"), Scalar("M"), Scalar("N")],
    reference=reference,
    shapes={"test": [{"M": 3, "N": 1000}, {"M": 5, "N": 257}, {"M": 2, "N": 31}]},
    tolerances={"float32": Tolerance(1e-4, 1e-4)},
    nondeterminism_tolerated=True,
)
