"""Histogram of int32 values in [-64, 64) into 128 bins (integer atomics: order-independent)."""

import torch

from klineage import Scalar, Tensor, Workload


def reference(v: torch.Tensor, N: int) -> torch.Tensor:
    return torch.bincount((v + 64).long(), minlength=128).int()


WORKLOAD = Workload(
    name="emu_hist",
    args=[Tensor("v", ("N",), "int32"), Tensor("h", (128,), "int32", role="out"), Scalar("N")],
    reference=reference,
    shapes={"test": [{"N": 5000}, {"N": 333}, {"N": 1}]},
)
