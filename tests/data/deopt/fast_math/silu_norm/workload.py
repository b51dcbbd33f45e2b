"""Row-normalized SiLU plus log1p(|x|) / 4 plus exp(x) / 8 (fixture of the fast_math operator)."""

import torch

from klineage import Scalar, Tensor, Workload
from klineage.workload import Tolerance


def reference(x: torch.Tensor, M: int, N: int) -> torch.Tensor:
    xd = x.double()
    scale = torch.rsqrt((xd * xd).mean(dim=1, keepdim=True) + 1e-5)
    y = torch.nn.functional.silu(xd) * scale + 0.25 * torch.log1p(xd.abs()) + torch.exp(xd) / 8
    return y.float()


WORKLOAD = Workload(
    name="silu_norm",
    description="y = silu(x) * rsqrt(mean(x^2) + eps) + log1p(|x|)/4 + exp(x)/8, per row, float32.",
    args=[
        Tensor("x", ("M", "N"), "float32"),
        Tensor("y", ("M", "N"), "float32", role="out", tolerance=Tolerance(1e-4, 1e-4)),
        Scalar("M", "int32"),
        Scalar("N", "int32"),
    ],
    reference=reference,
    shapes={
        "test": [{"M": 1, "N": 1}, {"M": 37, "N": 1000}, {"M": 64, "N": 256}],
        "emu": [{"M": 1, "N": 1}, {"M": 5, "N": 77}, {"M": 9, "N": 300}],
        "bench": [{"M": 8192, "N": 8192}],
    },
)
