"""The 2-norm and the largest magnitude of a float32 vector (fixture of grid_reduce's two-pass form)."""

import torch

from klineage import Scalar, Tensor, Workload


def reference(v: torch.Tensor, n: int) -> torch.Tensor:
    d = v.double()
    return torch.stack([d.norm(), d.abs().max()]).float()


WORKLOAD = Workload(
    name="norm_and_peak",
    description="2-norm and largest magnitude of a vector (fixture of grid_reduce)",
    args=[Tensor("v", ("n",), "float32", "in"), Tensor("result", (2,), "float32", "out"), Scalar("n")],
    reference=reference,
    shapes={
        "test": [{"n": 1}, {"n": 3001}, {"n": 300_007}],
        "emu": [{"n": 1}, {"n": 3001}, {"n": 300_007}],
        "bench": [{"n": 1 << 26}],
    },
)
