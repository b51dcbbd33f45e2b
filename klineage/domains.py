"""Value domains: how the gate draws the values of one input tensor (DESIGN.md, 'Workloads').

The default (no domain) is random signed values. Many operators are only defined on part of
that space: a cross-entropy target is a class index below the class count, a KL divergence reads
probabilities, a paged-attention kernel reads an `indptr` that starts at 0, never decreases and
ends at the number of indices, and indices below the number of pages. A kernel fed values outside
the domain is judged on inputs its operator never sees (and the reference often crashes or
returns NaN, which then reads as the kernel's fault). A `Domain` says which values are valid;
`Workload.make_inputs` draws every input of both backends through it.

Bounds (`low`, `high`, `total`) are ints, floats, or expressions on the shape symbols of the
binding (`"C"`, `"num_pages"`, `"N // 2"`), evaluated per shape.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import torch

#: kind -> what it draws (the words `problems()` and the docs use)
KINDS = {
    "normal": "N(mean, std) floats (torch.randn)",
    "uniform": "floats uniform in [low, high) (torch.rand: [0, 1))",
    "integers": "integers uniform in [low, high) (torch.randint; class or index ranges)",
    "softmax": "rows of probabilities along `dim` (softmax of `of` draws): positive, summing to 1",
    "indptr": "1-D offsets: 0 first, never decreasing, `total` last (CSR / paged-KV indptr); segments are "
    "non-empty when `total` allows",
    "constant": "every element equals `low`",
}

Bound = int | float | str


@dataclass(frozen=True)
class Domain:
    """Where one tensor's values come from; see KINDS. `of` is the base draw of `softmax`."""

    kind: str
    low: Bound = 0
    high: Bound = 1
    mean: float = 0.0
    std: float = 1.0
    dim: int = -1
    of: str = "normal"
    total: Bound | None = None

    def problems(self, name: str, dtype: str) -> list[str]:
        """Everything wrong with this domain for a tensor of that dtype, one line each."""
        out: list[str] = []
        if self.kind not in KINDS:
            return [f"tensor '{name}': unknown domain kind '{self.kind}' (known: {', '.join(KINDS)})"]
        floating = dtype in ("float32", "float64", "float16", "bfloat16")
        if self.kind in ("normal", "uniform", "softmax") and not floating:
            out.append(f"tensor '{name}': domain '{self.kind}' needs a float dtype, not {dtype}")
        if self.kind in ("integers", "indptr") and floating:
            out.append(f"tensor '{name}': domain '{self.kind}' needs an integer dtype, not {dtype}")
        if self.kind == "indptr" and self.total is None:
            out.append(f"tensor '{name}': domain 'indptr' needs `total` (the value of its last element)")
        if self.kind == "softmax" and self.of not in ("normal", "uniform"):
            out.append(f"tensor '{name}': softmax domain draws `of` normal or uniform, not '{self.of}'")
        return out

    def symbols(self) -> set[str]:
        """The shape symbols its bounds read (each binding must bind them)."""
        from klineage.workload import symbols_of

        return set().union(*(symbols_of(b) for b in (self.low, self.high, self.total) if b is not None))

    def draw(
        self,
        shape: tuple[int, ...],
        dtype: torch.dtype,
        gen: torch.Generator,
        bindings: Mapping[str, int | float],
    ) -> torch.Tensor:
        """Values of this domain for one shape; bounds evaluated on the shape's bindings."""
        from klineage.workload import eval_dim  # the one evaluator of shape arithmetic

        def bound(b: Bound | None) -> int | float:
            return eval_dim(b, bindings) if b is not None else 0

        if self.kind == "normal":
            return (self.mean + self.std * torch.randn(shape, generator=gen)).to(dtype)
        if self.kind == "uniform":
            lo, hi = float(bound(self.low)), float(bound(self.high))
            return (lo + (hi - lo) * torch.rand(shape, generator=gen)).to(dtype)
        if self.kind == "softmax":
            base = (
                torch.randn(shape, generator=gen) if self.of == "normal" else torch.rand(shape, generator=gen)
            )
            return (
                torch.softmax(base.double(), dim=self.dim).to(dtype)
                if base.dim()
                else torch.ones(shape, dtype=dtype)
            )
        if self.kind == "integers":
            lo, hi = int(bound(self.low)), int(bound(self.high))
            if hi <= lo:
                raise ValueError(f"integer domain [{lo}, {hi}) is empty")
            return torch.randint(lo, hi, shape, generator=gen, dtype=torch.int64).to(dtype)
        if self.kind == "indptr":
            return _indptr(shape, int(bound(self.total)), gen).to(dtype)
        return torch.full(shape, bound(self.low), dtype=dtype)  # constant


def _indptr(shape: tuple[int, ...], total: int, gen: torch.Generator) -> torch.Tensor:
    """0, sorted cut points, total: segments of random (possibly empty) lengths summing to total."""
    if len(shape) != 1 or shape[0] < 1:
        raise ValueError(f"an indptr is 1-D with at least one element, not {list(shape)}")
    n = shape[0]
    if n == 1:
        if total:
            raise ValueError(f"an indptr of one element cannot end at {total}")
        return torch.zeros(1, dtype=torch.int64)
    if total >= n - 1:  # every segment non-empty: n - 2 distinct cut points strictly inside (0, total)
        cuts = torch.sort(torch.randperm(total - 1, generator=gen, dtype=torch.int64)[: n - 2] + 1).values
    else:  # more segments than elements: some are empty
        cuts = torch.sort(torch.randint(0, total + 1, (n - 2,), generator=gen, dtype=torch.int64)).values
    return torch.cat([torch.zeros(1, dtype=torch.int64), cuts, torch.full((1,), total, dtype=torch.int64)])
