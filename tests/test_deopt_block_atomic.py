"""block_atomic: block reduction + one atomic per block -> one atomic per thread, and back."""

from __future__ import annotations

from pathlib import Path

import pytest
from deopt_parallel_checks import assert_passes, fixture, only_site

from klineage.deopt.base import Refused
from klineage.deopt.block_atomic import BlockAtomic
from klineage.source.model import CudaSource

OP = BlockAtomic()


def test_find_and_preconditions() -> None:
    src, _ = fixture("block_atomic", "sum_squares")
    (site,) = OP.find(src)
    assert site.details == {
        "kernel": "sum_squares",
        "level": "block",
        "op": "atomicAdd",
        "reducer": "block_sum",
        "value": "total",
    }
    facts = {f.name: f for f in OP.preconditions(src, site)}
    assert facts["combiner_matches_atomic"].holds and facts["order_tolerant_output"].holds
    assert "nondeterminism_tolerated" in facts["order_tolerant_output"].reason


def test_remove_one_atomic_per_thread(tmp_path: Path) -> None:
    src, wl = fixture("block_atomic", "sum_squares")
    out = OP.remove(src, only_site(OP, src))
    assert "const float total = acc;" in out.text and "    atomicAdd(out, total);" in out.text
    assert OP.find(out) == []
    assert_passes(out.text, wl, tmp_path, "sum_squares_per_thread.cu")


def test_apply_roundtrip(tmp_path: Path) -> None:
    src, wl = fixture("block_atomic", "sum_squares")
    simple = OP.remove(src, only_site(OP, src))
    (fwd,) = OP.find_forward(simple)
    assert all(f.holds for f in OP.preconditions(simple, fwd))
    again = OP.apply(simple, fwd)
    (site,) = OP.find(again)
    assert site.details["reducer"] == "block_sum_for_atomic"
    assert all(f.holds for f in OP.removal_preconditions(again, site))
    assert_passes(again.text, wl, tmp_path, "sum_squares_roundtrip.cu")


_RED = """
__device__ float block_sum(float v) {
    __shared__ float p[32];
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    if ((threadIdx.x & 31) == 0) p[threadIdx.x >> 5] = v;
    __syncthreads();
    v = threadIdx.x < 32 && threadIdx.x < blockDim.x / 32 ? p[threadIdx.x] : 0.f;
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}
__device__ float block_max(float v) {
    __shared__ float p[32];
    for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
    if ((threadIdx.x & 31) == 0) p[threadIdx.x >> 5] = v;
    __syncthreads();
    v = threadIdx.x < 32 && threadIdx.x < blockDim.x / 32 ? p[threadIdx.x] : -1e30f;
    for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
    return v;
}
"""

REFUSALS = {
    "inline reduction": (
        """
__global__ void k(const float* x, float* out) {
    float v = x[threadIdx.x];
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    if (threadIdx.x == 0) atomicAdd(out, v);
}""",
        "reduction_recognised",
    ),
    "value also stored": (
        _RED
        + """
__global__ void k(const float* x, float* out, float* per_block) {
    const float s = block_sum(x[threadIdx.x]);
    if (threadIdx.x == 0) per_block[blockIdx.x] = s;
    if (threadIdx.x == 0) atomicAdd(out, s);
}""",
        "reduced_value_only_for_atomic",
    ),
    "max reduction, add atomic": (
        _RED
        + """
__global__ void k(const float* x, float* out) {
    const float s = block_max(x[threadIdx.x]);
    if (threadIdx.x == 0) atomicAdd(out, s);
}""",
        "combiner_matches_atomic",
    ),
}


@pytest.mark.parametrize("case", sorted(REFUSALS))
def test_refusals(case: str) -> None:
    text, fact = REFUSALS[case]
    src = CudaSource.from_text(text, "r.cu")
    (site,) = OP.find(src)
    with pytest.raises(Refused, match=fact):
        OP.remove(src, site)


def test_forward_refuses_divergent_atomic() -> None:
    src = CudaSource.from_text("""
__global__ void k(const float* x, float* out, int n) {
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) atomicAdd(out, x[i]);
}
extern "C" void launch(const float* x, float* out, int n, cudaStream_t s) { k<<<(n + 255) / 256, 256, 0, s>>>(x, out, n); }
""")
    (fwd,) = OP.find_forward(src)
    with pytest.raises(Refused, match="reached_by_all_threads"):
        OP.apply(src, fwd)
