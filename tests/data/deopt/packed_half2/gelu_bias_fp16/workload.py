"""y = max(fp16(x * w + b), -1) per row, fp16, N even (fixture of the packed_half2 and vectorize operators)."""

import torch

from klineage import Scalar, Tensor, Workload
from klineage.workload import Tolerance


def reference(x: torch.Tensor, w: torch.Tensor, b: torch.Tensor, M: int, N: int) -> torch.Tensor:
    t = torch.addcmul(b.float(), x.float(), w.float()).half().float()
    return torch.clamp(t, min=-1.0).half()


WORKLOAD = Workload(
    name="affine_clamp_fp16",
    description="y = max(x * w + b, -1), fp16 rows of even length N (w, b broadcast over rows).",
    args=[
        Tensor("x", ("M", "N"), "float16"),
        Tensor("w", ("N",), "float16"),
        Tensor("b", ("N",), "float16"),
        Tensor("y", ("M", "N"), "float16", role="out", tolerance=Tolerance(2e-3, 2e-3)),
        Scalar("M", "int32"),
        Scalar("N", "int32"),
    ],
    reference=reference,
    shapes={
        "test": [{"M": 1, "N": 2}, {"M": 7, "N": 1000}, {"M": 3, "N": 4098}],
        "emu": [{"M": 1, "N": 2}, {"M": 3, "N": 64}, {"M": 2, "N": 166}],
        "bench": [{"M": 8192, "N": 8192}],
    },
)
