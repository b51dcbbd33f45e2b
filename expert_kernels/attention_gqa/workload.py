"""attention_gqa: fp16 grouped-query cross attention forward, O = softmax(Q K^T / sqrt(D)) V per
batch and query head, where query head h reads key/value head h / (H / G) and the key length Sk
differs from the query length Sq (no mask). Q, O are (B, H, Sq, D), K, V are (B, G, Sk, D), fp16
contiguous.

Launcher: launch(const __half* Q, const __half* K, const __half* V, __half* O, float* P, int B,
int H, int G, int Sq, int Sk, int D, cudaStream_t). `P` is a (B, H, Sq, Sk) fp32 scratch: the
naive kernel's scores; the expert (one pass over the keys with an online softmax) leaves it alone.
Preconditions: G divides H, D is 64, Sq and Sk are multiples of 32. Not a held-out instance under
another name: no held-out workload computes attention (attention_fwd in the corpus is
self-attention, one key/value head per query head, Sq = Sk, a causal flag, D 64 or 128).
The reference computes in float64; tolerance: relative Frobenius error <= 2e-3 (as attention_fwd).
"""

from __future__ import annotations

import math
from collections.abc import Mapping

import torch

from klineage import Scalar, Tensor, Tolerance, Workload


def reference(
    Q: torch.Tensor, K: torch.Tensor, V: torch.Tensor, B: int, H: int, G: int, Sq: int, Sk: int, D: int
) -> torch.Tensor:
    k = K.double().repeat_interleave(H // G, dim=1)
    v = V.double().repeat_interleave(H // G, dim=1)
    s = (Q.double() @ k.transpose(-1, -2)) / math.sqrt(D)
    return (torch.softmax(s, dim=-1) @ v).to(torch.float16)


def vendor(
    Q: torch.Tensor, K: torch.Tensor, V: torch.Tensor, B: int, H: int, G: int, Sq: int, Sk: int, D: int
) -> torch.Tensor:
    return torch.nn.functional.scaled_dot_product_attention(Q, K, V, enable_gqa=True)


def flops(b: Mapping[str, int]) -> float:
    # two products of 2 * Sq * Sk * D each per query head
    return 4.0 * b["B"] * b["H"] * b["Sq"] * b["Sk"] * b["D"]


WORKLOAD = Workload(
    name="attention_gqa",
    args=[
        Tensor("Q", ("B", "H", "Sq", "D"), "float16", "in"),
        Tensor("K", ("B", "G", "Sk", "D"), "float16", "in"),
        Tensor("V", ("B", "G", "Sk", "D"), "float16", "in"),
        Tensor("O", ("B", "H", "Sq", "D"), "float16", "out"),
        Tensor("P", ("B", "H", "Sq", "Sk"), "float32", "scratch"),
        Scalar("B"),
        Scalar("H"),
        Scalar("G"),
        Scalar("Sq"),
        Scalar("Sk"),
        Scalar("D"),
    ],
    reference=reference,
    shapes={
        "test": [
            {"B": 1, "H": 4, "G": 2, "Sq": 64, "Sk": 96, "D": 64},
            {"B": 2, "H": 8, "G": 2, "Sq": 256, "Sk": 512, "D": 64},
            {"B": 1, "H": 8, "G": 1, "Sq": 160, "Sk": 1024, "D": 64},
        ],
        "emu": [
            {"B": 1, "H": 2, "G": 1, "Sq": 32, "Sk": 64, "D": 64},
            {"B": 1, "H": 4, "G": 2, "Sq": 64, "Sk": 32, "D": 64},
        ],
        "bench": [
            {"B": 4, "H": 32, "G": 8, "Sq": 1024, "Sk": 4096, "D": 64},
            {"B": 8, "H": 16, "G": 2, "Sq": 1024, "Sk": 4096, "D": 64},
        ],
    },
    tolerances={"float16": Tolerance(0.0, 2e-3, "frobenius")},
    divisible_by={"Sq": 32, "Sk": 32},
    description="fp16 grouped-query cross attention forward, key length apart from query length, head dim 64",
    vendor=vendor,
    flops=flops,
)
