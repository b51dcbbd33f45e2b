"""class_weight_sum: per-class sums of fp32 weights over int32 class labels (a weighted bincount).

out[c] = sum of weights[i] over the i with labels[i] == c, for C = 1000 classes (torch.bincount
with weights). A scatter with conflicts into a small table: the second lineage of the scattered
atomics (issue 24), not the held-out byte histogram under another name (other operation: a
weighted sum, not a count; other dtypes: int32 labels and fp32 weights into fp32 sums, not uint8
into int32 counts; other extent: 1000 bins, not 256).

Labels are drawn uniform over the classes; weights uniform in [0, 1). The sums are order-dependent
in fp32 (atomics add in no fixed order), so the tolerance is the accumulation bound over N terms
and nondeterminism is tolerated. Launcher: launch(const int* labels, const float* weights,
float* out, int N, cudaStream_t); it clears out and adds into it on `stream`.
"""

from __future__ import annotations

from collections.abc import Mapping

import torch

from klineage import Scalar, Tensor, Tolerance, Workload
from klineage.domains import Domain

#: number of classes (bins); the kernels fix it at compile time
CLASSES = 1000


def reference(labels: torch.Tensor, weights: torch.Tensor, N: int) -> torch.Tensor:
    return torch.bincount(labels.long(), weights.double(), minlength=CLASSES).to(torch.float32)


def vendor(labels: torch.Tensor, weights: torch.Tensor, N: int) -> torch.Tensor:
    return torch.bincount(labels, weights, minlength=CLASSES)


def flops(b: Mapping[str, int]) -> float:
    return float(b["N"])


WORKLOAD = Workload(
    name="class_weight_sum",
    description="per-class sums of fp32 weights over int32 labels (weighted bincount, 1000 classes)",
    args=[
        Tensor("labels", ("N",), "int32", "in", domain=Domain("integers", 0, CLASSES)),
        Tensor("weights", ("N",), "float32", "in", domain=Domain("uniform", 0.0, 1.0)),
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
