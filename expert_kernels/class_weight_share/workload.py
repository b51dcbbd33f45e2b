"""class_weight_share: each class's share of the total weight, over int32 class labels.

out[c] = (sum of weights[i] over the i with labels[i] == c) / (sum of all weights), for C = 1000
classes: a weighted bincount (torch.bincount with weights) normalized by its total, as for class
frequencies in class-balanced losses. A scatter with conflicts into a small table, then one
pass over the table: the second lineage of the scattered atomics (issue 24), not the held-out
byte histogram under another name (other operation: normalized weighted sums, not counts; other
dtypes: int32 labels and fp32 weights into fp32 shares, not uint8 into int32 counts; other
extent: 1000 bins, not 256).

Labels are drawn uniform over the classes; weights uniform in [0.5, 1.5) (the total is never 0).
The sums are order-dependent in fp32 (atomics add in no fixed order), so the tolerance is the
accumulation bound over N terms and nondeterminism is tolerated. Launcher: launch(const int*
labels, const float* weights, float* out, int N, cudaStream_t); it clears out, adds into it and
normalizes it, all on `stream`.
"""

from __future__ import annotations

from collections.abc import Mapping

import torch

from klineage import Scalar, Tensor, Tolerance, Workload
from klineage.domains import Domain

#: number of classes (bins); the kernels fix it at compile time
CLASSES = 1000


def reference(labels: torch.Tensor, weights: torch.Tensor, N: int) -> torch.Tensor:
    w = weights.double()
    return (torch.bincount(labels.long(), w, minlength=CLASSES) / w.sum()).to(torch.float32)


def vendor(labels: torch.Tensor, weights: torch.Tensor, N: int) -> torch.Tensor:
    return torch.bincount(labels, weights, minlength=CLASSES) / weights.sum()


def flops(b: Mapping[str, int]) -> float:
    return float(b["N"])


WORKLOAD = Workload(
    name="class_weight_share",
    description="per-class share of the total fp32 weight over int32 labels (normalized weighted bincount)",
    args=[
        Tensor("labels", ("N",), "int32", "in", domain=Domain("integers", 0, CLASSES)),
        Tensor("weights", ("N",), "float32", "in", domain=Domain("uniform", 0.5, 1.5)),
        Tensor("out", (CLASSES,), "float32", "out", tolerance=Tolerance.accumulation("N")),
        Scalar("N"),
    ],
    reference=reference,
    vendor=vendor,
    flops=flops,
    nondeterminism_tolerated=True,
    shapes={
        "test": [{"N": 1}, {"N": 4099}, {"N": 100_003}, {"N": (1 << 20) + 3}],
        "emu": [{"N": 1}, {"N": 4099}, {"N": 20_003}],
        "bench": [{"N": 1 << 27}],
    },
)
