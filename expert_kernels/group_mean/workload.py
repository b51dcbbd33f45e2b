"""group_mean: the mean and the count of fp32 values per group, over int32 group ids.

means[g] = (sum of values[i] over the i with ids[i] == g) / counts[g], counts[g] = number of such
i (a mean of 0 for an empty group), for G = 500 groups: a segment mean keyed by small ids, as in
per-class feature statistics. Two scattered outputs of different types (an fp32 sum and an int32
count) into a small table, then one pass over the table: a further lineage of the scattered
atomics (issue 24) beside class_weight_share, and not the held-out byte histogram (other
operation: a mean and a count per group; other dtypes: int32 ids and fp32 values; 500 bins).

Ids are drawn uniform over the groups; values uniform in [-1, 1). The sums are order-dependent in
fp32 (atomics add in no fixed order), so the tolerance of the means is the accumulation bound and
nondeterminism is tolerated; the counts are exact. Launcher: launch(const int* ids, const float*
values, float* means, int* counts, int N, cudaStream_t); it clears both outputs, adds into them
and divides, all on `stream`.
"""

from __future__ import annotations

from collections.abc import Mapping

import torch

from klineage import Scalar, Tensor, Tolerance, Workload
from klineage.domains import Domain

#: number of groups (bins); the kernels fix it at compile time
GROUPS = 500


def reference(ids: torch.Tensor, values: torch.Tensor, N: int) -> dict[str, torch.Tensor]:
    counts = torch.bincount(ids.long(), minlength=GROUPS)
    sums = torch.bincount(ids.long(), values.double(), minlength=GROUPS)
    means = torch.where(counts > 0, sums / counts.clamp(min=1), torch.zeros_like(sums))
    return {"means": means.to(torch.float32), "counts": counts.to(torch.int32)}


def vendor(ids: torch.Tensor, values: torch.Tensor, N: int) -> tuple[torch.Tensor, torch.Tensor]:
    counts = torch.bincount(ids, minlength=GROUPS)
    sums = torch.bincount(ids, values, minlength=GROUPS)
    return sums / counts.clamp(min=1), counts


def flops(b: Mapping[str, int]) -> float:
    return float(b["N"])


WORKLOAD = Workload(
    name="group_mean",
    description="per-group mean and count of fp32 values over int32 group ids (segment mean, 500 groups)",
    args=[
        Tensor("ids", ("N",), "int32", "in", domain=Domain("integers", 0, GROUPS)),
        Tensor("values", ("N",), "float32", "in", domain=Domain("uniform", -1.0, 1.0)),
        Tensor("means", (GROUPS,), "float32", "out", tolerance=Tolerance.accumulation("N")),
        Tensor("counts", (GROUPS,), "int32", "out"),
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
