"""C = A B for fp16 A (M x K) and B (K x N), fp32 C (fixture of the wgmma operator: a Hopper GEMM
whose tiles threads copy into shared memory by hand, no TMA)."""

import torch

from klineage import Scalar, Tensor, Workload
from klineage.workload import Tolerance


def reference(A: torch.Tensor, B: torch.Tensor, M: int, N: int, K: int) -> torch.Tensor:
    return (A.double() @ B.double()).float()


def vendor(A: torch.Tensor, B: torch.Tensor, M: int, N: int, K: int) -> torch.Tensor:
    return torch.matmul(A, B).float()  # cuBLAS fp16 GEMM, widened


WORKLOAD = Workload(
    name="wgmma_plain_loads",
    description="C = A B, fp16 inputs, fp32 output, any M, N, K.",
    vendor=vendor,
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
        "test": [{"M": 64, "N": 64, "K": 64}, {"M": 200, "N": 136, "K": 100}, {"M": 512, "N": 384, "K": 1024}],
        "emu": [{"M": 64, "N": 64, "K": 64}, {"M": 80, "N": 72, "K": 144}],
        "bench": [{"M": 4096, "N": 4096, "K": 4096}],
    },
)
