"""C = alpha * A @ B, half A (M, K) and B (K, N), float sum, half C (fixture of tensor_core's
removal on a WMMA GEMM); shapes that are multiples of nothing."""

import torch

from klineage import Scalar, Tensor, Tolerance, Workload


def reference(A: torch.Tensor, B: torch.Tensor, alpha: float, M: int, N: int, K: int) -> torch.Tensor:
    return (alpha * (A.double() @ B.double())).half()


WORKLOAD = Workload(
    name="wmma_scaled",
    description="half GEMM scaled by alpha, WMMA with a block-wide float staging tile, any M, N, K.",
    args=[
        Tensor("A", ("M", "K"), "float16"),
        Tensor("B", ("K", "N"), "float16"),
        Tensor("C", ("M", "N"), "float16", role="out"),
        Scalar("alpha", "float32", value=0.5),
        Scalar("M", "int32"),
        Scalar("N", "int32"),
        Scalar("K", "int32"),
    ],
    reference=reference,
    tolerances={"float16": Tolerance(1e-2, 1e-2, "frobenius")},
    shapes={
        "test": [{"M": 1, "N": 1, "K": 1}, {"M": 100, "N": 70, "K": 33}],
        "emu": [{"M": 3, "N": 5, "K": 7}, {"M": 45, "N": 37, "K": 40}],
        "bench": [{"M": 4096, "N": 4096, "K": 4096}],
    },
    flops=lambda s: 2.0 * s["M"] * s["N"] * s["K"],
)
