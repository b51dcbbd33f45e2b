"""Row sums of a float16 matrix, accumulated in float32 by the reference."""

import torch

from klineage import Scalar, Tensor, Workload


def reference(x: torch.Tensor, M: int, N: int) -> torch.Tensor:
    return x.float().sum(dim=1).half()


WORKLOAD = Workload(
    name="emu_rowsum_h",
    args=[
        Tensor("x", ("M", "N"), "float16"),
        Tensor("y", ("M",), "float16", role="out"),
        Scalar("M"),
        Scalar("N"),
    ],
    reference=reference,
    shapes={"test": [{"M": 4, "N": 2048}, {"M": 3, "N": 999}, {"M": 2, "N": 64}]},
)
