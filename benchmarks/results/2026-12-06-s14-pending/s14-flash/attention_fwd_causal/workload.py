# s14-flash: attention_fwd's workload with the causal bench shape first (timed by run_gpu.sh)
"""attention_fwd: fp16 scaled-dot-product attention forward, O = softmax(Q K^T / sqrt(D) [+ causal
mask]) V, per batch and head; Q, K, V, O are (B, H, S, D) contiguous fp16.

Launcher: launch(const __half* Q, const __half* K, const __half* V, __half* O, float* P, int B,
int H, int S, int D, int causal, cudaStream_t). `causal` is a shape symbol (0 or 1) so that one
workload covers both masks; causal masks key j > query i. `P` is a (B, H, S, S) fp32 scratch
buffer: the naive kernel's score matrix; the expert (flash-style, one pass over K and V) leaves
it alone. Preconditions: D is 64 or 128 and S is a multiple of 128 (the expert's query tile).
The reference computes in float64; tolerance: relative Frobenius error <= 2e-3 (fp16 rounding
of O is about 3e-4 rms, the fp16 probabilities in the second product about as much again).
"""

from __future__ import annotations

import math
from collections.abc import Mapping

import torch

from klineage import Scalar, Tensor, Tolerance, Workload


def reference(
    Q: torch.Tensor, K: torch.Tensor, V: torch.Tensor, B: int, H: int, S: int, D: int, causal: int
) -> torch.Tensor:
    q, k, v = Q.double(), K.double(), V.double()
    s = (q @ k.transpose(-1, -2)) / math.sqrt(D)
    if causal:
        mask = torch.ones(S, S, dtype=torch.bool, device=s.device).triu(1)
        s = s.masked_fill(mask, float("-inf"))
    return (torch.softmax(s, dim=-1) @ v).to(torch.float16)


def vendor(
    Q: torch.Tensor, K: torch.Tensor, V: torch.Tensor, B: int, H: int, S: int, D: int, causal: int
) -> torch.Tensor:
    return torch.nn.functional.scaled_dot_product_attention(Q, K, V, is_causal=bool(causal))


def flops(b: Mapping[str, int]) -> float:
    # two products of 2 * S * S * D each per head; causal does (about) half
    f = 4.0 * b["B"] * b["H"] * b["S"] * b["S"] * b["D"]
    return f / 2 if b["causal"] else f


WORKLOAD = Workload(
    name="attention_fwd",
    args=[
        Tensor("Q", ("B", "H", "S", "D"), "float16", "in"),
        Tensor("K", ("B", "H", "S", "D"), "float16", "in"),
        Tensor("V", ("B", "H", "S", "D"), "float16", "in"),
        Tensor("O", ("B", "H", "S", "D"), "float16", "out"),
        Tensor("P", ("B", "H", "S", "S"), "float32", "scratch"),
        Scalar("B"),
        Scalar("H"),
        Scalar("S"),
        Scalar("D"),
        Scalar("causal"),
    ],
    reference=reference,
    shapes={
        "test": [
            {"B": 1, "H": 2, "S": 128, "D": 64, "causal": 0},
            {"B": 2, "H": 3, "S": 384, "D": 64, "causal": 1},
            {"B": 1, "H": 2, "S": 256, "D": 128, "causal": 0},
            {"B": 2, "H": 2, "S": 640, "D": 128, "causal": 1},
            {"B": 1, "H": 4, "S": 1024, "D": 128, "causal": 0},
            {"B": 1, "H": 1, "S": 1152, "D": 64, "causal": 0},
        ],
        # every launcher path on the emulator: both head dims x both masks (with fewer, the
        # walker accepted "keep only the D = 64 kernels", then "keep only the causal D = 128
        # kernel": removals no emu shape could refute)
        "emu": [
            {"B": 1, "H": 1, "S": 128, "D": 64, "causal": 0},
            {"B": 1, "H": 1, "S": 128, "D": 64, "causal": 1},
            {"B": 1, "H": 1, "S": 128, "D": 128, "causal": 0},
            {"B": 1, "H": 1, "S": 128, "D": 128, "causal": 1},
        ],
        "bench": [
            {"B": 8, "H": 16, "S": 2048, "D": 128, "causal": 1},
            {"B": 8, "H": 16, "S": 2048, "D": 128, "causal": 0},
        ],
    },
    tolerances={"float16": Tolerance(0.0, 2e-3, "frobenius")},
    divisible_by={"S": 128},
    description="fp16 scaled-dot-product attention forward, causal flag, head dim 64 or 128",
    vendor=vendor,
    flops=flops,
)
