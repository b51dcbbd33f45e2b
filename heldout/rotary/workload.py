"""rotary: rotary position embedding (rotate-half / NeoX layout) of fp16 x (T, H, D) with fp32
cos/sin tables (T, D/2): out[..., i] = x1*cos - x2*sin, out[..., i + D/2] = x2*cos + x1*sin,
where x1 = x[..., :D/2], x2 = x[..., D/2:]. Precondition: D even.

Held out: a new operator (elementwise with a broadcast table and a paired element). cos/sin need a
custom init: the real tables for base 10000 (position t, frequency i), computed from their shape.
The reference computes in float64 and rounds once to fp16; tolerance: torch's fp16 defaults.
Launcher: launch(const __half* x, const float* cos, const float* sin, __half* out, int T, int H,
int D, cudaStream_t).
"""

from __future__ import annotations

from collections.abc import Mapping

import torch

from klineage import Scalar, Tensor, Workload


def _angles(shape: tuple[int, ...]) -> torch.Tensor:
    t, half = shape
    inv_freq = 10000.0 ** (-torch.arange(half, dtype=torch.float64) / half)
    return torch.arange(t, dtype=torch.float64)[:, None] * inv_freq[None, :]


def _cos(shape: tuple[int, ...], dtype: torch.dtype, gen: torch.Generator) -> torch.Tensor:
    return torch.cos(_angles(shape)).to(dtype)


def _sin(shape: tuple[int, ...], dtype: torch.dtype, gen: torch.Generator) -> torch.Tensor:
    return torch.sin(_angles(shape)).to(dtype)


def _rotate(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    half = x.shape[-1] // 2
    x1, x2 = x[..., :half], x[..., half:]
    c, s = cos[:, None, :], sin[:, None, :]
    return torch.cat((x1 * c - x2 * s, x2 * c + x1 * s), dim=-1)


def reference(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, T: int, H: int, D: int) -> torch.Tensor:
    return _rotate(x.double(), cos.double(), sin.double()).half()


def vendor(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, T: int, H: int, D: int) -> torch.Tensor:
    return _rotate(x, cos.half(), sin.half())


def flops(b: Mapping[str, int]) -> float:
    return 3.0 * b["T"] * b["H"] * b["D"]


WORKLOAD = Workload(
    name="rotary",
    description="rotary position embedding (rotate-half), fp16 activations, fp32 tables",
    args=[
        Tensor("x", ("T", "H", "D"), "float16", "in"),
        Tensor("cos", ("T", "D//2"), "float32", "in", init=_cos),
        Tensor("sin", ("T", "D//2"), "float32", "in", init=_sin),
        Tensor("out", ("T", "H", "D"), "float16", "out"),
        Scalar("T"),
        Scalar("H"),
        Scalar("D"),
    ],
    reference=reference,
    vendor=vendor,
    flops=flops,
    divisible_by={"D": 2},
    shapes={
        "test": [{"T": 1, "H": 1, "D": 2}, {"T": 37, "H": 5, "D": 128}, {"T": 129, "H": 3, "D": 66},
                 {"T": 1000, "H": 1, "D": 10}],
        "emu": [{"T": 1, "H": 1, "D": 2}, {"T": 37, "H": 3, "D": 64}, {"T": 129, "H": 3, "D": 18},
                {"T": 500, "H": 1, "D": 10}],
        "bench": [{"T": 16384, "H": 32, "D": 128}],
    },
)
