"""out[b] = max(0, max of values[i] with bucket[i] == b) over 64 buckets (fixture of
privatized_atomics: an integer max, the extent from a guard against a #define)."""

import torch

from klineage import Scalar, Tensor, Workload
from klineage.domains import Domain


def reference(bucket: torch.Tensor, values: torch.Tensor, n: int) -> torch.Tensor:
    out = torch.zeros(64, dtype=torch.int32, device=values.device)
    return out.scatter_reduce(0, bucket.long(), values, "amax", include_self=True)


WORKLOAD = Workload(
    name="bucket_max",
    description="Largest non-negative value per bucket, 64 buckets.",
    args=[
        Tensor("bucket", ("n",), "int32", domain=Domain("integers", 0, 64)),
        Tensor("values", ("n",), "int32", domain=Domain("integers", 0, 100000)),
        Tensor("out", (64,), "int32", role="out"),
        Scalar("n", "int32"),
    ],
    reference=reference,
    shapes={
        "test": [{"n": 1}, {"n": 1000}, {"n": 70001}],
        "emu": [{"n": 1}, {"n": 555}, {"n": 8193}],
        "bench": [{"n": 1 << 26}],
    },
)
