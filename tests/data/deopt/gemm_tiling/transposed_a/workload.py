"""C = alpha * A^T @ B with A stored (K, M), float32 (fixture of the gemm_tiling operator)."""

import torch

from klineage import Scalar, Tensor, Tolerance, Workload


def reference(At: torch.Tensor, B: torch.Tensor, alpha: float, M: int, N: int, K: int) -> torch.Tensor:
    return (alpha * (At.double().t() @ B.double())).float()


WORKLOAD = Workload(
    name="gemm_tn",
    description="fp32 GEMM with a transposed first operand, any M, N, K.",
    args=[
        Tensor("At", ("K", "M"), "float32"),
        Tensor("B", ("K", "N"), "float32"),
        Tensor("C", ("M", "N"), "float32", role="out"),
        Scalar("alpha", "float32", value=0.5),
        Scalar("M", "int32"),
        Scalar("N", "int32"),
        Scalar("K", "int32"),
    ],
    reference=reference,
    tolerances={"float32": Tolerance(1e-4, 1e-5, "frobenius")},
    shapes={
        "test": [{"M": 1, "N": 1, "K": 1}, {"M": 100, "N": 70, "K": 33}],
        "emu": [{"M": 1, "N": 1, "K": 1}, {"M": 21, "N": 17, "K": 19}],
        "bench": [{"M": 4096, "N": 4096, "K": 4096}],
    },
    flops=lambda s: 2.0 * s["M"] * s["N"] * s["K"],
)
