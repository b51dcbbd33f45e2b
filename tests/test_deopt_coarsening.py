"""coarsening: F items per thread -> one item per thread (grid x F), and back."""

from __future__ import annotations

from pathlib import Path

import pytest
from deopt_parallel_checks import assert_passes, fixture, only_site
from hypothesis import given, settings
from hypothesis import strategies as st

from klineage.deopt.base import Refused
from klineage.deopt.coarsening import Coarsening
from klineage.source.model import CudaSource

OP = Coarsening()


def test_find_records_factor() -> None:
    src, _ = fixture("coarsening", "scale_shift")
    (site,) = OP.find(src)
    assert site.details == {"factor": "ITEMS", "kernel": "scale_shift_coarse", "var": "k"}
    assert all(p.holds for p in OP.removal_preconditions(src, site))


def test_remove_one_item_per_thread(tmp_path: Path) -> None:
    src, wl = fixture("coarsening", "scale_shift")
    out = OP.remove(src, only_site(OP, src))
    assert "blockIdx.x * blockDim.x + threadIdx.x" in out.text and "#pragma unroll" not in out.text
    assert "<<<grid * kItems, block" in out.text  # the launch's own template argument
    assert OP.find(out) == []
    assert_passes(out.text, wl, tmp_path, "scale_shift_one_item.cu")


def test_apply_roundtrip(tmp_path: Path) -> None:
    src, wl = fixture("coarsening", "scale_shift")
    simple = OP.remove(src, only_site(OP, src))
    (fwd,) = OP.find_forward(simple)
    assert all(p.holds for p in OP.preconditions(simple, fwd))
    again = OP.apply(simple, fwd)
    (site,) = OP.find(again)
    assert site.details["factor"] == "4"
    assert_passes(again.text, wl, tmp_path, "scale_shift_roundtrip.cu")


REFUSALS = {
    "factor sizes a register array": (
        """
template <int F>
__global__ void k(const float* x, float* y, int n) {
    float v[F];
    const int base = blockIdx.x * (blockDim.x * F) + threadIdx.x;
    for (int j = 0; j < F; ++j) { int i = base + j * blockDim.x; v[j] = i < n ? x[i] : 0.f; if (i < n) y[i] = v[j]; }
}
extern "C" void launch(const float* x, float* y, int n, cudaStream_t s) { k<4><<<(n + 1023) / 1024, 256, 0, s>>>(x, y, n); }
""",
        "factor_only_coarsens",
    ),
    "unscaled block offset": (
        """
__global__ void k(const float* x, float* y, int n) {
    const int base = blockIdx.x * (blockDim.x * 4) + threadIdx.x;
    for (int j = 0; j < 4; ++j) { int i = base + j * blockDim.x; if (i < n) y[i] = x[i] + blockIdx.x * blockDim.x; }
}
extern "C" void launch(const float* x, float* y, int n, cudaStream_t s) { k<<<(n + 1023) / 1024, 256, 0, s>>>(x, y, n); }
""",
        "all_block_offsets_scaled",
    ),
}


@pytest.mark.parametrize("case", sorted(REFUSALS))
def test_refusals(case: str) -> None:
    text, fact = REFUSALS[case]
    src = CudaSource.from_text(text, "r.cu")
    (site,) = OP.find(src)
    with pytest.raises(Refused, match=fact):
        OP.remove(src, site)


def test_reduction_loop_is_not_coarsening() -> None:
    """A loop whose items feed an accumulator (a GEMM k-loop, a per-thread partial sum) is not a site."""
    src = CudaSource.from_text("""
template <int F>
__global__ void k(const float* x, float* y, int n) {
    float acc = 0.f;
    const int base = blockIdx.x * blockDim.x * F + threadIdx.x;
    for (int j = 0; j < F; ++j) { int i = base + j * blockDim.x; if (i < n) acc += x[i]; }
    atomicAdd(y, acc);
}
extern "C" void launch(const float* x, float* y, int n, cudaStream_t s) { k<4><<<(n + 1023) / 1024, 256, 0, s>>>(x, y, n); }
""")
    assert OP.find(src) == []


def _coarse(items: int, block: int, blocked: bool) -> str:
    if blocked:  # each thread owns ITEMS consecutive elements
        base = "(blockIdx.x * blockDim.x + threadIdx.x) * ITEMS"
        idx = "base + k"
    else:
        base = "blockIdx.x * (ITEMS * blockDim.x) + threadIdx.x"
        idx = "base + k * blockDim.x"
    return f"""#include <cuda_runtime.h>
template <int ITEMS>
__global__ void scale_shift_coarse(const float* __restrict__ x, float* __restrict__ y, int n) {{
    const int base = {base};
#pragma unroll
    for (int k = 0; k < ITEMS; ++k) {{
        const int idx = {idx};
        if (idx < n) y[idx] = 1.5f * x[idx] - 0.25f;
    }}
}}
extern "C" void launch(const float* x, float* y, int n, cudaStream_t stream) {{
    const int grid = (n + {block * items - 1}) / {block * items};
    scale_shift_coarse<{items}><<<grid, {block}, 0, stream>>>(x, y, n);
}}
"""


@pytest.mark.slow
@settings(max_examples=4, deadline=None, derandomize=True)
@given(items=st.sampled_from([2, 3, 4, 8]), block=st.sampled_from([32, 64, 128]), blocked=st.booleans())
def test_property_removal_keeps_function(
    tmp_path_factory: pytest.TempPathFactory, items: int, block: int, blocked: bool
) -> None:
    src = CudaSource.from_text(_coarse(items, block, blocked), "gen.cu")
    (site,) = OP.find(src)
    out = OP.remove(src, site)
    assert OP.find(out) == [] and f"grid * {items}" in out.text
    _, wl = fixture("coarsening", "scale_shift")
    assert_passes(out.text, wl, tmp_path_factory.mktemp("co"), "gen.cu")
