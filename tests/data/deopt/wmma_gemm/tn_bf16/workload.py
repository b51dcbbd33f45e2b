"""C = At^T @ B in bf16 with a float sum, At stored (K, M) (fixture of tensor_core's forward step):
whole 128 x 128 tiles and four K slices, then M, N and K tails with row strides that are no
multiple of 8 elements."""

import torch

from klineage import Scalar, Tensor, Tolerance, Workload


def reference(At: torch.Tensor, B: torch.Tensor, M: int, N: int, K: int) -> torch.Tensor:
    return (At.double().t() @ B.double()).to(torch.float32)


WORKLOAD = Workload(
    name="gemm_tn_bf16",
    description="bf16 GEMM with a k-major first operand, whole and partial block tiles.",
    args=[
        Tensor("At", ("K", "M"), "bfloat16"),
        Tensor("B", ("K", "N"), "bfloat16"),
        Tensor("C", ("M", "N"), "bfloat16", role="out"),
        Scalar("M", "int32"),
        Scalar("N", "int32"),
        Scalar("K", "int32"),
    ],
    reference=reference,
    tolerances={"bfloat16": Tolerance(0.0, 1e-2, "frobenius")},
    shapes={
        "test": [{"M": 128, "N": 128, "K": 256}, {"M": 131, "N": 77, "K": 70}],
        "emu": [{"M": 128, "N": 128, "K": 256}, {"M": 131, "N": 77, "K": 70}],
        "bench": [{"M": 4096, "N": 4096, "K": 4096}],
    },
    flops=lambda s: 2.0 * s["M"] * s["N"] * s["K"],
)
