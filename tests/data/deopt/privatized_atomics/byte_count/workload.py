"""counts[v] = how many keys equal v, for 8-bit keys (fixture of privatized_atomics: the extent
comes from the key's type; the launcher clears the counts with a kernel, not a memset)."""

import torch

from klineage import Scalar, Tensor, Workload


def reference(keys: torch.Tensor, n: int) -> torch.Tensor:
    return torch.bincount(keys.long(), minlength=256).to(torch.int32)


WORKLOAD = Workload(
    name="byte_count",
    description="Occurrences of each value of a vector of unsigned bytes.",
    args=[
        Tensor("keys", ("n",), "uint8"),
        Tensor("counts", (256,), "int32", role="out"),
        Scalar("n", "int32"),
    ],
    reference=reference,
    shapes={
        "test": [{"n": 1}, {"n": 1000}, {"n": 70001}],
        "emu": [{"n": 1}, {"n": 777}, {"n": 9001}],
        "bench": [{"n": 1 << 28}],
    },
)
