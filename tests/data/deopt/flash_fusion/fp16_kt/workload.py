"""O = softmax(Q K^T / sqrt(D)) V per head, fp16, keys stored transposed (BH, D, N) and a value
width E that is not a multiple of 8 (fixture of flash_fusion's tensor-core staging): a key row is
not contiguous, value rows are not 16-byte aligned; 64 and 37 query rows per head."""

import math

import torch

from klineage import Scalar, Tensor, Tolerance, Workload


def reference(
    Q: torch.Tensor, KT: torch.Tensor, V: torch.Tensor, BH: int, M: int, N: int, D: int, E: int
) -> torch.Tensor:
    s = (Q.double() @ KT.double()) / math.sqrt(D)
    return (torch.softmax(s, dim=-1) @ V.double()).half()


WORKLOAD = Workload(
    name="attention_fp16_kt",
    description="fp16 attention per head, keys stored transposed, value width not a multiple of 8.",
    args=[
        Tensor("Q", ("BH", "M", "D"), "float16"),
        Tensor("KT", ("BH", "D", "N"), "float16"),
        Tensor("V", ("BH", "N", "E"), "float16"),
        Tensor("O", ("BH", "M", "E"), "float16", role="out"),
        Tensor("S", ("BH", "M", "N"), "float32", role="scratch"),
        Scalar("BH", "int32"),
        Scalar("M", "int32"),
        Scalar("N", "int32"),
        Scalar("D", "int32"),
        Scalar("E", "int32"),
    ],
    reference=reference,
    tolerances={"float16": Tolerance(0.0, 2e-3, "frobenius")},
    shapes={
        "test": [
            {"BH": 2, "M": 64, "N": 75, "D": 32, "E": 20},
            {"BH": 3, "M": 37, "N": 45, "D": 16, "E": 12},
        ],
        "bench": [{"BH": 64, "M": 1024, "N": 1024, "D": 64, "E": 64}],
    },
)
