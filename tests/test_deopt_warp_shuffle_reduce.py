"""warp_shuffle_reduce: shuffle reductions -> per-warp shared-memory trees (__syncwarp), and back."""

from __future__ import annotations

from pathlib import Path

import pytest
from deopt_parallel_checks import assert_passes, fixture

from klineage.deopt.base import Refused
from klineage.deopt.warp_shuffle_reduce import WarpShuffleReduce
from klineage.source.model import CudaSource

OP = WarpShuffleReduce()


def test_find_all_forms() -> None:
    src, _ = fixture("warp_shuffle_reduce", "centered_sum")
    got = [
        (s.details["function"], s.details["kind"], s.details["form"], s.details["combiner"])
        for s in OP.find(src)
    ]
    assert got == [
        ("warp_sum", "down", "loop", "{a} + {b}"),
        ("centered_sum_warp", "xor", "loop", "fmaxf({a}, {b})"),
        ("centered_sum_block", "xor", "unrolled", "fmaxf({a}, {b})"),
    ]
    facts = OP.preconditions(src, OP.find(src)[0])
    assert {f.name for f in facts} >= {
        "full_warp_mask",
        "whole_warp_reduction",
        "warp_converged",
        "recognised_combiner",
    }
    assert all(f.holds for f in facts)  # the call inside `if (warp == 0)` is warp-uniform


def test_remove_every_site_passes(tmp_path: Path) -> None:
    """All three removals, one after another (device function, broadcast xor loop, unrolled form)."""
    src, wl = fixture("warp_shuffle_reduce", "centered_sum")
    cur = src
    for _ in range(3):
        cur = OP.remove(cur, OP.find(cur)[0])
    assert OP.find(cur) == [] and "__shfl" not in cur.text
    assert cur.text.count("__syncwarp();") == 3 * 3 and "__syncthreads" in cur.text
    assert_passes(cur.text, wl, tmp_path, "centered_sum_trees.cu")


def test_apply_roundtrip(tmp_path: Path) -> None:
    src, wl = fixture("warp_shuffle_reduce", "centered_sum")
    sites = OP.find(src)
    simple = OP.remove(src, sites[1])  # the xor max loop whose result every lane reads
    (fwd,) = OP.find_forward(simple)
    again = OP.apply(simple, fwd)
    assert len(OP.find(again)) == 3
    assert "m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, off));" in again.text
    assert_passes(again.text, wl, tmp_path, "centered_sum_roundtrip.cu")


def test_roundtrip_text_equal_for_sum() -> None:
    from klineage.source.text import normalize

    src = CudaSource.from_text("""__device__ float ws(float v) {
#pragma unroll
    for (int off = 16; off > 0; off >>= 1) v += __shfl_xor_sync(0xffffffffu, v, off);
    return v;
}
""")
    simple = OP.remove(src, OP.find(src)[0])
    again = OP.apply(simple, OP.find_forward(simple)[0])
    assert normalize(again.text) == normalize(src.text)


REFUSALS = {
    "lane-divergent branch": (
        """
__global__ void k(float* y) {
    float v = y[threadIdx.x];
    const int lane = threadIdx.x % 32;
    if (lane < 16) {
        for (int off = 16; off > 0; off >>= 1) v += __shfl_xor_sync(0xffffffff, v, off);
    }
    y[threadIdx.x] = v;
}""",
        "warp_converged",
    ),
    "partial mask": (
        """
__global__ void k(float* y) {
    float v = y[threadIdx.x];
    for (int off = 16; off > 0; off >>= 1) v += __shfl_down_sync(0x0000ffffu, v, off);
    y[threadIdx.x] = v;
}""",
        "full_warp_mask",
    ),
    "segmented": (
        """
__global__ void k(float* y) {
    float v = y[threadIdx.x];
    for (int off = 4; off > 0; off >>= 1) v += __shfl_xor_sync(0xffffffffu, v, off);
    y[threadIdx.x] = v;
}""",
        "whole_warp_reduction",
    ),
    "shuffle inside an expression": (
        """
__global__ void k(float* y) {
    float v = y[threadIdx.x];
    for (int off = 16; off > 0; off >>= 1) {
        const float t = __shfl_down_sync(0xffffffffu, v, off) * 0.5f;
        v += t;
    }
    y[threadIdx.x] = v;
}""",
        "recognised_combiner",
    ),
}


@pytest.mark.parametrize("case", sorted(REFUSALS))
def test_refusals(case: str) -> None:
    text, fact = REFUSALS[case]
    src = CudaSource.from_text(text, "r.cu")
    (site,) = OP.find(src)
    with pytest.raises(Refused, match=fact):
        OP.remove(src, site)


WARP_MERGE_SOFTMAX = """#include <cuda_runtime.h>
#include <math.h>
__device__ __forceinline__ void merge(float& m, float& d, float m2, float d2) {
    const float mn = fmaxf(m, m2);
    if (mn == -INFINITY) return;
    d = d * __expf(m - mn) + d2 * __expf(m2 - mn);
    m = mn;
}
// One warp per row: per-lane online (max, sum), a shuffle merge of the pairs, then the write.
__global__ void softmax_warp(const float* __restrict__ x, float* __restrict__ y, int M, int N) {
    const int lane = threadIdx.x & 31, row = blockIdx.x * 2 + threadIdx.x / 32;
    if (row >= M) return;
    const float* xr = x + (size_t)row * N;
    float m = -INFINITY, d = 0.f;
    for (int j = lane; j < N; j += 32) {
        const float mn = fmaxf(m, xr[j]);
        d = d * __expf(m - mn) + __expf(xr[j] - mn);
        m = mn;
    }
#pragma unroll
    for (int off = 16; off > 0; off >>= 1) {
        const float m2 = __shfl_down_sync(0xffffffffu, m, off);
        const float d2 = __shfl_down_sync(0xffffffffu, d, off);
        merge(m, d, m2, d2);
    }
    m = __shfl_sync(0xffffffffu, m, 0);
    d = __shfl_sync(0xffffffffu, d, 0);
    for (int j = lane; j < N; j += 32) y[(size_t)row * N + j] = __expf(xr[j] - m) / d;
}
extern "C" void launch(const float* x, float* y, int M, int N, cudaStream_t stream) {
    softmax_warp<<<(M + 1) / 2, 64, 0, stream>>>(x, y, M, N);
}
"""


def test_multi_value_merge_becomes_per_value_buffers(tmp_path: Path) -> None:
    src = CudaSource.from_text(WARP_MERGE_SOFTMAX, "warp_merge.cu")
    (site,) = OP.find(src)
    assert (site.details["combiner"], site.details["values"]) == ("merge", "m,d")
    out = OP.remove(src, site)
    assert "__shfl_down_sync" not in out.text and "tree_m[tree_warp][tree_lane + off]" in out.text
    assert_passes(out.text, fixture("online_softmax", "softmax_rows")[1], tmp_path, "warp_merge_tree.cu")


def test_guarded_rolled_loop_roundtrip(tmp_path: Path) -> None:
    """A shuffle loop whose steps a warp-uniform template condition guards (a template-unrolled tree
    rolled back): the tree keeps the guard per level, passes the gate, and the forward step restores
    a guarded shuffle loop."""
    op = WarpShuffleReduce()
    data = Path(__file__).resolve().parent / "data" / "deopt"
    # the kernel, and the workload it shares with load_add's fixture (sums of 256-element chunks)
    src = CudaSource.from_file(data / "warp_shuffle_reduce" / "guarded_block_sums.cu")
    folder = data / "load_add" / "warp_chunk"
    (site,) = op.find(src)
    assert all(p.holds for p in op.removal_preconditions(src, site))
    simpler = op.remove(src, site)
    assert "if (acc_lane < s && (width >= 2 * s))" in simpler.text
    assert "__shfl" not in simpler.text
    assert_passes(simpler.text, folder, tmp_path)
    (fwd,) = op.find_forward(simpler)
    restored = op.apply(simpler, fwd)
    assert "if (width>=2*off) acc += __shfl_xor_sync(0xffffffffu, acc, off);" in restored.text
    assert_passes(restored.text, folder, tmp_path, "restored.cu")


@pytest.mark.parametrize(
    ("guard", "uniform"),
    [
        ("width >= 2 * off", True),
        ("n > off && width >= 2 * off", True),
        ("(threadIdx.x & 31) < off", False),
        ("lane < off", False),
        ("pick(off)", False),
    ],
)
def test_only_a_warp_uniform_guard_is_a_reduction_step(guard: str, uniform: bool) -> None:
    """The guard may read the offset, template and kernel parameters; a lane, a local or a call
    could split the warp, and then the loop is not a warp reduction."""
    text = (
        "__device__ bool pick(int o) { return o > 2; }\n"
        "template <int width> __global__ void k(float* x, int n) {\n"
        "  const int lane = threadIdx.x & 31; float v = x[threadIdx.x];\n"
        f"  for (int off = 16; off > 0; off >>= 1) {{ if ({guard}) v += __shfl_down_sync(0xffffffff, v, off); }}\n"
        "  if (lane == 0) x[threadIdx.x] = v; }"
    )
    src = CudaSource.from_text(text)
    (site,) = WarpShuffleReduce().find(src)
    if uniform:
        assert "__shfl" not in WarpShuffleReduce().remove(src, site).text
    else:
        with pytest.raises(Refused, match="not a single assignment"):
            WarpShuffleReduce().remove(src, site)
