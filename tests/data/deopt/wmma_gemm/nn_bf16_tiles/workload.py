"""C = alpha * A @ B in bf16 with a float sum (fixture of tensor_core's forward step): shapes where
every block tile and K slice is whole (the staging's fast path, the three-stage ring wrapping
around), and shapes with M, N and K tails and a row stride that is no multiple of 8 elements."""

import torch

from klineage import Scalar, Tensor, Tolerance, Workload


def reference(A: torch.Tensor, B: torch.Tensor, alpha: float, M: int, N: int, K: int) -> torch.Tensor:
    return (alpha * (A.double() @ B.double())).to(torch.float32)


WORKLOAD = Workload(
    name="gemm_nn_bf16_tiles",
    description="bf16 GEMM scaled by alpha, whole and partial block tiles.",
    args=[
        Tensor("A", ("M", "K"), "bfloat16"),
        Tensor("B", ("K", "N"), "bfloat16"),
        Tensor("C", ("M", "N"), "bfloat16", role="out"),
        Scalar("alpha", "float32", 0.5),
        Scalar("M", "int32"),
        Scalar("N", "int32"),
        Scalar("K", "int32"),
    ],
    reference=reference,
    tolerances={"bfloat16": Tolerance(0.0, 1e-2, "frobenius")},
    shapes={
        "test": [{"M": 128, "N": 128, "K": 256}, {"M": 200, "N": 136, "K": 200}, {"M": 130, "N": 129, "K": 196}],
        "emu": [{"M": 128, "N": 128, "K": 256}, {"M": 200, "N": 136, "K": 200}, {"M": 130, "N": 129, "K": 196}],
        "bench": [{"M": 4096, "N": 4096, "K": 4096}],
    },
    flops=lambda s: 2.0 * s["M"] * s["N"] * s["K"],
)
