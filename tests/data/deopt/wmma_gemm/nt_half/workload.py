"""C = A @ Bt^T + bias, half inputs stored (M, K) and (N, K), float sum, half output (fixture of
tensor_core's forward step); shapes that are multiples of nothing."""

import torch

from klineage import Scalar, Tensor, Tolerance, Workload


def reference(A: torch.Tensor, Bt: torch.Tensor, bias: torch.Tensor, M: int, N: int, K: int) -> torch.Tensor:
    return (A.double() @ Bt.double().t() + bias.double()[None, :]).half()


WORKLOAD = Workload(
    name="gemm_nt_half",
    description="half GEMM with a transposed second operand and a bias, any M, N, K.",
    args=[
        Tensor("A", ("M", "K"), "float16"),
        Tensor("Bt", ("N", "K"), "float16"),
        Tensor("bias", ("N",), "float16"),
        Tensor("C", ("M", "N"), "float16", role="out"),
        Scalar("M", "int32"),
        Scalar("N", "int32"),
        Scalar("K", "int32"),
    ],
    reference=reference,
    tolerances={"float16": Tolerance(1e-2, 1e-2, "frobenius")},
    shapes={
        "test": [{"M": 1, "N": 1, "K": 1}, {"M": 100, "N": 70, "K": 33}],
        "emu": [{"M": 1, "N": 3, "K": 5}, {"M": 67, "N": 45, "K": 37}],
        "bench": [{"M": 4096, "N": 4096, "K": 4096}],
    },
    flops=lambda s: 2.0 * s["M"] * s["N"] * s["K"],
)
