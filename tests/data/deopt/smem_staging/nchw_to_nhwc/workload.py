"""NCHW -> NHWC permute of float32 images, spatial dims flattened (fixture of smem_staging's
forward step)."""

import torch

from klineage import Scalar, Tensor, Workload


def reference(inp: torch.Tensor, n: int, c: int, hw: int) -> torch.Tensor:
    return inp.permute(0, 2, 1).contiguous()


WORKLOAD = Workload(
    name="nchw_to_nhwc_fixture",
    description="(n, c, hw) -> (n, hw, c) permute, flat-index naive kernel.",
    args=[
        Tensor("inp", ("n", "c", "hw"), "float32"),
        Tensor("out", ("n", "hw", "c"), "float32", role="out"),
        Scalar("n", "int32"),
        Scalar("c", "int32"),
        Scalar("hw", "int32"),
    ],
    reference=reference,
    shapes={
        "test": [{"n": 1, "c": 1, "hw": 1}, {"n": 2, "c": 3, "hw": 1001}, {"n": 3, "c": 64, "hw": 49}],
        "emu": [{"n": 1, "c": 1, "hw": 1}, {"n": 2, "c": 3, "hw": 35}, {"n": 2, "c": 33, "hw": 40}],
        "bench": [{"n": 32, "c": 256, "hw": 3136}],
    },
)
