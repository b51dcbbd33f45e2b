"""out = 2 in over an M x N fp32 matrix: the workload of the emulator's TMA and mbarrier kernels
(tests/test_emu_hopper.py); N a multiple of 4 so that a row is a multiple of 16 bytes, as a tensor
map's strides must be."""

import torch

from klineage import Scalar, Tensor, Workload


def reference(x: torch.Tensor, M: int, N: int) -> torch.Tensor:
    return 2 * x


WORKLOAD = Workload(
    name="emu_tma_scale",
    args=[Tensor("x", ("M", "N")), Tensor("out", ("M", "N"), role="out"), Scalar("M"), Scalar("N")],
    reference=reference,
    shapes={
        "test": [{"M": 64, "N": 64}, {"M": 50, "N": 68}],
        "emu": [{"M": 64, "N": 64}, {"M": 50, "N": 68}],
    },
)
