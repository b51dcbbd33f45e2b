"""C = (A B) / 2 for fp16 A, B and fp32 C; M, N, K multiples of 16 (fixture of the tensor_core operator)."""

import torch

from klineage import Scalar, Tensor, Workload
from klineage.workload import Tolerance


def reference(A: torch.Tensor, B: torch.Tensor, M: int, N: int, K: int) -> torch.Tensor:
    return (A.double() @ B.double()).float() * 0.5


WORKLOAD = Workload(
    name="wmma_gemm",
    description="C = A B / 2, fp16 inputs, fp32 output; M, N and K are multiples of 16 (a stated precondition).",
    args=[
        Tensor("A", ("M", "K"), "float16"),
        Tensor("B", ("K", "N"), "float16"),
        Tensor("C", ("M", "N"), "float32", role="out", tolerance=Tolerance(1e-3, 1e-3)),
        Scalar("M", "int32"),
        Scalar("N", "int32"),
        Scalar("K", "int32"),
    ],
    reference=reference,
    shapes={
        "test": [{"M": 16, "N": 16, "K": 16}, {"M": 48, "N": 32, "K": 64}, {"M": 128, "N": 64, "K": 96}],
        "emu": [{"M": 16, "N": 16, "K": 16}, {"M": 32, "N": 48, "K": 32}, {"M": 16, "N": 32, "K": 64}],
        "bench": [{"M": 8192, "N": 8192, "K": 8192}],
    },
)
