"""O = softmax(Q K^T / sqrt(D)) V per head, fp32, value width E apart from key width D (fixture of
flash_fusion's forward step); M rows per head odd and N keys not a multiple of the key tile."""

import math

import torch

from klineage import Scalar, Tensor, Tolerance, Workload


def reference(
    Q: torch.Tensor, K: torch.Tensor, V: torch.Tensor, BH: int, M: int, N: int, D: int, E: int
) -> torch.Tensor:
    s = (Q.double() @ K.double().transpose(-1, -2)) / math.sqrt(D)
    return (torch.softmax(s, dim=-1) @ V.double()).float()


WORKLOAD = Workload(
    name="attention_fp32_heads",
    description="fp32 attention per head with value width apart from key width, any sizes.",
    args=[
        Tensor("Q", ("BH", "M", "D"), "float32"),
        Tensor("K", ("BH", "N", "D"), "float32"),
        Tensor("V", ("BH", "N", "E"), "float32"),
        Tensor("O", ("BH", "M", "E"), "float32", role="out"),
        Tensor("S", ("BH", "M", "N"), "float32", role="scratch"),
        Scalar("BH", "int32"),
        Scalar("M", "int32"),
        Scalar("N", "int32"),
        Scalar("D", "int32"),
        Scalar("E", "int32"),
    ],
    reference=reference,
    tolerances={"float32": Tolerance(0.0, 1e-4, "frobenius")},
    shapes={
        "test": [{"BH": 3, "M": 37, "N": 45, "D": 16, "E": 24}],
        "emu": [{"BH": 3, "M": 37, "N": 45, "D": 16, "E": 24}, {"BH": 1, "M": 64, "N": 33, "D": 8, "E": 8}],
        "bench": [{"BH": 64, "M": 1024, "N": 1024, "D": 64, "E": 64}],
    },
)
