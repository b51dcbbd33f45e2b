"""O = softmax(Q K^T / sqrt(D) [+ causal mask]) V per head, fp16 (fixture of flash_fusion's
tensor-core forward step): sequence lengths that are not multiples of the 64-row tile (tiles span
heads; the last key tile partial), head sizes padded to 16, and causal lengths long enough that
whole key tiles above the diagonal are skipped."""

import math

import torch

from klineage import Scalar, Tensor, Tolerance, Workload


def reference(
    Q: torch.Tensor, K: torch.Tensor, V: torch.Tensor, BH: int, S: int, D: int, causal: int
) -> torch.Tensor:
    s = (Q.double() @ K.double().transpose(-1, -2)) / math.sqrt(D)
    if causal:
        s = s.masked_fill(torch.ones(S, S, dtype=torch.bool, device=s.device).triu(1), float("-inf"))
    return (torch.softmax(s, dim=-1) @ V.double()).half()


WORKLOAD = Workload(
    name="attention_fp16_causal",
    description="fp16 causal or full attention per head, any sequence length and head size.",
    args=[
        Tensor("Q", ("BH", "S", "D"), "float16"),
        Tensor("K", ("BH", "S", "D"), "float16"),
        Tensor("V", ("BH", "S", "D"), "float16"),
        Tensor("O", ("BH", "S", "D"), "float16", role="out"),
        Tensor("P", ("BH", "S", "S"), "float32", role="scratch"),
        Scalar("BH", "int32"),
        Scalar("S", "int32"),
        Scalar("D", "int32"),
        Scalar("causal", "int32"),
    ],
    reference=reference,
    tolerances={"float16": Tolerance(0.0, 2e-3, "frobenius")},
    shapes={
        "test": [{"BH": 2, "S": 200, "D": 40, "causal": 1}, {"BH": 1, "S": 320, "D": 64, "causal": 1}],
        "emu": [
            {"BH": 2, "S": 200, "D": 40, "causal": 1},
            {"BH": 1, "S": 320, "D": 64, "causal": 1},
            {"BH": 1, "S": 130, "D": 24, "causal": 0},
        ],
        "bench": [{"BH": 64, "S": 1024, "D": 64, "causal": 1}],
    },
)
