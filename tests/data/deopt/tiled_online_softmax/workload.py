"""Attention forward for the tiled_online_softmax tests: fp32 Q, K, V, O (B, H, S, D), O =
softmax(Q K^T / sqrt(D)) V per batch and head; M, L (B, H, S) fp32 scratch (each row's running max
and sum). S a multiple of 32 (the kernel's tile)."""

from __future__ import annotations

import math

import torch

from klineage import Scalar, Tensor, Workload


def reference(Q, K, V, B: int, H: int, S: int, D: int) -> torch.Tensor:
    s = (Q.double() @ K.double().transpose(-1, -2)) / math.sqrt(D)
    return (torch.softmax(s, dim=-1) @ V.double()).to(torch.float32)


WORKLOAD = Workload(
    name="tiled_online_softmax_attention",
    args=[
        Tensor("Q", ("B", "H", "S", "D"), "float32", "in"),
        Tensor("K", ("B", "H", "S", "D"), "float32", "in"),
        Tensor("V", ("B", "H", "S", "D"), "float32", "in"),
        Tensor("O", ("B", "H", "S", "D"), "float32", "out"),
        Tensor("M", ("B", "H", "S"), "float32", "scratch"),
        Tensor("L", ("B", "H", "S"), "float32", "scratch"),
        Scalar("B"),
        Scalar("H"),
        Scalar("S"),
        Scalar("D"),
    ],
    reference=reference,
    shapes={
        "test": [{"B": 1, "H": 2, "S": 64, "D": 32}, {"B": 2, "H": 1, "S": 96, "D": 16}],
        "emu": [{"B": 1, "H": 2, "S": 64, "D": 16}, {"B": 1, "H": 1, "S": 96, "D": 8}],
        "bench": [{"B": 4, "H": 8, "S": 256, "D": 64}],
    },
    divisible_by={"S": 32},
    description="fp32 attention forward over key tiles with a running max and sum per row",
)
