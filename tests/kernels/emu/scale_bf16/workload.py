"""y = bf16(2 * x + 1) elementwise on bfloat16 pairs (N even)."""

import torch

from klineage import Scalar, Tensor, Workload


def reference(x: torch.Tensor, N: int) -> torch.Tensor:
    return (x.float() * 2 + 1).bfloat16()


WORKLOAD = Workload(
    name="emu_scale_bf16",
    args=[Tensor("x", ("N",), "bfloat16"), Tensor("y", ("N",), "bfloat16", role="out"), Scalar("N")],
    reference=reference,
    shapes={"test": [{"N": 1024}, {"N": 130}, {"N": 2}]},
    divisible_by={"N": 2},
)
