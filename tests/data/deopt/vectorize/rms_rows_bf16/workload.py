"""Root mean square of bfloat16 rows into float32 (fixture of vectorize's packed row loops over a
warp's lanes; odd row lengths misalign every other row pointer)."""

import torch

from klineage import Scalar, Tensor, Workload
from klineage.workload import Tolerance


def reference(x: torch.Tensor, m: int, n: int) -> torch.Tensor:
    return x.double().pow(2).mean(dim=1).sqrt().float()


WORKLOAD = Workload(
    name="rms_rows_bf16",
    description="y = sqrt(mean(x^2)) per row, bf16 in, fp32 out, any shape.",
    args=[
        Tensor("x", ("m", "n"), "bfloat16"),
        Tensor("y", ("m",), "float32", role="out", tolerance=Tolerance(1e-4, 1e-5)),
        Scalar("m", "int32"),
        Scalar("n", "int32"),
    ],
    reference=reference,
    shapes={
        "test": [{"m": 1, "n": 1}, {"m": 37, "n": 1001}, {"m": 5, "n": 4096}],
        "emu": [{"m": 1, "n": 1}, {"m": 5, "n": 77}, {"m": 3, "n": 1030}],
        "bench": [{"m": 65536, "n": 4096}],
    },
)
