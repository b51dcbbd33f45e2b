"""c = a + b over N floats: the workload of the emu adversarial element-wise kernels."""

import torch

from klineage import Scalar, Tensor, Workload


def reference(a: torch.Tensor, b: torch.Tensor, N: int) -> torch.Tensor:
    return a + b


WORKLOAD = Workload(
    name="emu_vadd",
    args=[Tensor("a", ("N",)), Tensor("b", ("N",)), Tensor("c", ("N",), role="out"), Scalar("N")],
    reference=reference,
    shapes={"test": [{"N": 1000}, {"N": 1500}, {"N": 77}]},
)
