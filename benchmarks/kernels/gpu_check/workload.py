"""Row softmax, fp32: the tiny workload of the GPU gate check (benchmarks/gpu_gate_check.py).

Memory-bound (one read, one write per element), with a torch vendor to time against; test
shapes include sizes that are not multiples of any block or vector width.
"""

import torch

from klineage.workload import Scalar, Tensor, Workload


def reference(x: torch.Tensor, M: int, N: int) -> torch.Tensor:
    return torch.softmax(x.double(), dim=-1).float()


def vendor(x: torch.Tensor, M: int, N: int) -> torch.Tensor:
    return torch.softmax(x, dim=-1)


WORKLOAD = Workload(
    name="gpu_check_softmax",
    description="y[m, :] = softmax(x[m, :]) for an M x N float32 matrix",
    args=[
        Tensor("x", ("M", "N"), "float32", "in"),
        Tensor("y", ("M", "N"), "float32", "out"),
        Scalar("M", "int32"),
        Scalar("N", "int32"),
    ],
    reference=reference,
    vendor=vendor,
    flops=lambda b: 5.0 * b["M"] * b["N"],
    shapes={
        "test": [{"M": 3, "N": 5}, {"M": 17, "N": 1000}, {"M": 64, "N": 4099}],
        "bench": [{"M": 8192, "N": 4096}],
    },
)
