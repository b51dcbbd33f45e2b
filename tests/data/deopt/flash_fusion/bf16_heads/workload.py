"""O = softmax(Q K^T / sqrt(D)) V per head, bf16 in and out, value width E apart from key width D
(fixture of flash_fusion's tensor-core forward step); M rows per head odd, N keys not a multiple of
the key tile, head sizes not all multiples of 16."""

import math

import torch

from klineage import Scalar, Tensor, Tolerance, Workload


def reference(
    Q: torch.Tensor, K: torch.Tensor, V: torch.Tensor, BH: int, M: int, N: int, D: int, E: int
) -> torch.Tensor:
    s = (Q.double() @ K.double().transpose(-1, -2)) / math.sqrt(D)
    return (torch.softmax(s, dim=-1) @ V.double()).bfloat16()


WORKLOAD = Workload(
    name="attention_bf16_heads",
    description="bf16 attention per head with value width apart from key width, any sizes.",
    args=[
        Tensor("Q", ("BH", "M", "D"), "bfloat16"),
        Tensor("K", ("BH", "N", "D"), "bfloat16"),
        Tensor("V", ("BH", "N", "E"), "bfloat16"),
        Tensor("O", ("BH", "M", "E"), "bfloat16", role="out"),
        Tensor("S", ("BH", "M", "N"), "float32", role="scratch"),
        Scalar("BH", "int32"),
        Scalar("M", "int32"),
        Scalar("N", "int32"),
        Scalar("D", "int32"),
        Scalar("E", "int32"),
    ],
    reference=reference,
    tolerances={"bfloat16": Tolerance(0.0, 2e-2, "frobenius")},
    shapes={
        "test": [{"BH": 3, "M": 37, "N": 45, "D": 16, "E": 24}],
        "emu": [{"BH": 3, "M": 37, "N": 45, "D": 16, "E": 24}, {"BH": 1, "M": 64, "N": 33, "D": 48, "E": 16}],
        "bench": [{"BH": 64, "M": 1024, "N": 1024, "D": 64, "E": 64}],
    },
)
