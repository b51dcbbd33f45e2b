"""cross_entropy: per-row cross-entropy loss of fp32 logits (M, C) against int64 class targets (M,),
loss[m] = logsumexp(logits[m]) - logits[m, target[m]] (F.cross_entropy, reduction='none').

Held out: a new operator (a row reduction plus a data-dependent gather). Targets need a custom
init: uniform class ids in [0, C). An init sees only its tensor's shape (M,), so every shape below
uses a distinct M and the number of classes is looked up from it (checked at import).
The reference computes in float64 and rounds once; tolerance: torch's fp32 defaults.
Launcher: launch(const float* logits, const long long* target, float* loss, int M, int C,
cudaStream_t).
"""

from __future__ import annotations

from collections.abc import Mapping

import torch
import torch.nn.functional as F

from klineage import Scalar, Tensor, Workload

SHAPES = {
    "test": [{"M": 1, "C": 1}, {"M": 37, "C": 4097}, {"M": 300, "C": 10}, {"M": 5, "C": 32003}],
    "emu": [{"M": 2, "C": 1}, {"M": 39, "C": 513}, {"M": 301, "C": 10}, {"M": 3, "C": 5003}],
    "bench": [{"M": 8192, "C": 32000}],
}
_CLASSES: dict[int, int] = {}
for _b in (b for shapes in SHAPES.values() for b in shapes):
    assert _CLASSES.setdefault(_b["M"], _b["C"]) == _b["C"], "each M must imply one C"


def _targets(shape: tuple[int, ...], dtype: torch.dtype, gen: torch.Generator) -> torch.Tensor:
    return torch.randint(0, _CLASSES[shape[0]], shape, generator=gen, dtype=torch.int64).to(dtype)


def reference(logits: torch.Tensor, target: torch.Tensor, M: int, C: int) -> torch.Tensor:
    return F.cross_entropy(logits.double(), target, reduction="none").float()


def vendor(logits: torch.Tensor, target: torch.Tensor, M: int, C: int) -> torch.Tensor:
    return F.cross_entropy(logits, target, reduction="none")


def flops(b: Mapping[str, int]) -> float:
    # max, subtract, exp, add per logit
    return 4.0 * b["M"] * b["C"]


WORKLOAD = Workload(
    name="cross_entropy",
    description="per-row cross-entropy forward of fp32 logits with int64 targets",
    args=[
        Tensor("logits", ("M", "C"), "float32", "in"),
        Tensor("target", ("M",), "int64", "in", init=_targets),
        Tensor("loss", ("M",), "float32", "out"),
        Scalar("M"),
        Scalar("C"),
    ],
    reference=reference,
    vendor=vendor,
    flops=flops,
    shapes=SHAPES,
)
