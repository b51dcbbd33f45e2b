"""grid_stride: grid-stride loops -> one element per thread (launcher grid covers n), and back."""

from __future__ import annotations

from pathlib import Path

import pytest
from deopt_parallel_checks import assert_passes, fixture, only_site
from hypothesis import given, settings
from hypothesis import strategies as st

from klineage.deopt.base import Refused
from klineage.deopt.grid_stride import GridStride
from klineage.source.model import CudaSource

OP = GridStride()


def test_find_records_loop() -> None:
    src, _ = fixture("grid_stride", "saxpy")
    (site,) = OP.find(src)
    assert (
        site.details["var"] == "i" and site.details["bound"] == "n" and site.details["block"] == "blockDim.x"
    )
    assert site.anchor.function == "saxpy_grid_stride" and site.anchor.node_kind == "for_statement"


def test_remove_one_element_per_thread(tmp_path: Path) -> None:
    src, wl = fixture("grid_stride", "saxpy")
    out = OP.remove(src, only_site(OP, src))
    assert "gridDim" not in out.text and "if (i < n)" in out.text
    assert "<<<(n + block - 1) / block, block" in out.text  # the launcher's own n and block
    assert OP.find(out) == []
    assert_passes(out.text, wl, tmp_path, "saxpy_one_per_thread.cu")


def test_apply_restores_grid_stride(tmp_path: Path) -> None:
    src, wl = fixture("grid_stride", "saxpy")
    simple = OP.remove(src, only_site(OP, src))
    (fwd,) = OP.find_forward(simple)
    # saxpy shares nothing between its elements: the skill refuses it, the rewrite itself still works
    assert [p.name for p in OP.preconditions(simple, fwd) if not p.holds] == ["work_to_amortize"]
    again = OP._apply(simple, fwd)
    assert len(OP.find(again)) == 1
    assert "132 * 8" in again.text  # grid capped to a multiple of the SM count
    assert_passes(again.text, wl, tmp_path, "saxpy_roundtrip.cu")


def test_vector_add_tail_loop_keeps_grid_cover() -> None:
    src = CudaSource.from_file(Path(__file__).parent.parent / "examples/vector_add/expert.cu")
    sites = OP.find(src)
    assert [s.details["offset"] for s in sites] == ["", "4*n4"]
    out = OP.remove(src, sites[1])
    # the other loop still strides: the grid becomes max(old grid, cover of the tail)
    assert "blocks >" in out.text and "if (i < n)" in out.text


REFUSALS = {
    "barrier": (
        """
__global__ void k(float* y, int n) {
    __shared__ float s[256];
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x) {
        s[threadIdx.x] = y[i]; __syncthreads(); y[i] = s[255 - threadIdx.x];
    }
}
extern "C" void launch(float* y, int n, cudaStream_t st) { k<<<64, 256, 0, st>>>(y, n); }
""",
        "no_barrier_in_body",
    ),
    "reused grid": (
        """
__global__ void part(const float* x, float* p, int n) {
    float a = 0.f;
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) a += x[i];
    atomicAdd(&p[blockIdx.x], a);
}
__global__ void fin(const float* p, int m, float* o) { if (threadIdx.x == 0) { float s = 0; for (int j = 0; j < m; ++j) s += p[j]; o[0] = s; } }
extern "C" void launch(const float* x, float* p, float* o, int n, cudaStream_t st) {
    int blocks = 40;
    part<<<blocks, 256, 0, st>>>(x, p, n);
    fin<<<1, 32, 0, st>>>(p, blocks, o);
}
""",
        "grid_not_reused",
    ),
    "dim3 grid": (
        """
__global__ void k(float* y, int n) {
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) y[i] *= 2.f;
}
extern "C" void launch(float* y, int n, cudaStream_t st) { dim3 g(64, 2); k<<<g, 256, 0, st>>>(y, n); }
""",
        "grid_1d",
    ),
    "count not in launcher": (
        """
__device__ int g_count;
__global__ void k(float* y) {
    const int n = g_count;
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) y[i] *= 2.f;
}
extern "C" void launch(float* y, cudaStream_t st) { k<<<64, 256, 0, st>>>(y); }
""",
        "grid_computable",
    ),
}


@pytest.mark.parametrize("case", sorted(REFUSALS))
def test_refusals(case: str) -> None:
    text, fact = REFUSALS[case]
    src = CudaSource.from_text(text, f"{case}.cu")
    (site,) = OP.find(src)
    with pytest.raises(Refused, match=fact):
        OP.remove(src, site)


def _saxpy(block: int, cap: int, inline_stride: bool, tid_var: bool) -> str:
    start = "tid" if tid_var else "blockIdx.x * blockDim.x + threadIdx.x"
    stride = "gridDim.x * blockDim.x" if inline_stride else "stride"
    return f"""#include <cuda_runtime.h>
__global__ void saxpy_gs(const float* __restrict__ x, const float* __restrict__ y, float* __restrict__ z, float a, int n) {{
    const int tid = blockIdx.x * blockDim.x + threadIdx.x;
    const int stride = blockDim.x * gridDim.x;
    for (int i = {start}; i < n; i += {stride}) z[i] = a * x[i] + y[i];
}}
extern "C" void launch(const float* x, const float* y, float* z, int n, cudaStream_t stream) {{
    const int threads = {block};
    int blocks = (n + threads - 1) / threads;
    blocks = blocks > {cap} ? {cap} : blocks;
    saxpy_gs<<<blocks, threads, 0, stream>>>(x, y, z, 2.5f, n);
}}
"""


@pytest.mark.slow
@settings(max_examples=4, deadline=None, derandomize=True)
@given(
    block=st.sampled_from([32, 64, 96, 128, 256]),
    cap=st.integers(1, 9),
    inline_stride=st.booleans(),
    tid_var=st.booleans(),
)
def test_property_removal_keeps_function(
    tmp_path_factory: pytest.TempPathFactory, block: int, cap: int, inline_stride: bool, tid_var: bool
) -> None:
    src = CudaSource.from_text(_saxpy(block, cap, inline_stride, tid_var), "gen.cu")
    (site,) = OP.find(src)
    out = OP.remove(src, site)
    assert OP.find(out) == [] and "(n + threads - 1) / threads" in out.text
    _, wl = fixture("grid_stride", "saxpy")
    assert_passes(out.text, wl, tmp_path_factory.mktemp("gs"), "gen.cu")


PERSISTENT_ROWS = """#include <cuda_runtime.h>
__global__ void row_mean_persistent(const float* __restrict__ x, float* __restrict__ y, int M, int N) {
    __shared__ float part[128];
    for (int row = blockIdx.x; row < M; row += gridDim.x) {
        float acc = 0.f;
        for (int j = threadIdx.x; j < N; j += 128) acc += x[(size_t)row * N + j];
        part[threadIdx.x] = acc;
        __syncthreads();
        for (int s = 64; s > 0; s >>= 1) {
            if (threadIdx.x < s) part[threadIdx.x] += part[threadIdx.x + s];
            __syncthreads();
        }
        if (threadIdx.x == 0) y[row] = part[0] / (float)N;
        __syncthreads();
    }
}
extern "C" void launch(const float* x, float* y, int M, int N, cudaStream_t stream) {
    const int blocks = M < 3 ? M : 3;  // persistent: a few blocks stride over the rows
    row_mean_persistent<<<blocks, 128, 0, stream>>>(x, y, M, N);
}
"""


def test_block_stride_rows_keep_barriers(tmp_path: Path) -> None:
    """A block-stride loop (rows over blocks) becomes one row per block; its barriers stay legal
    because the new guard `row < M` is uniform over the block."""
    src = CudaSource.from_text(PERSISTENT_ROWS, "persistent.cu")
    (site,) = OP.find(src)
    assert site.details["level"] == "block"
    out = OP.remove(src, site)
    assert "int row = blockIdx.x;" in out.text and "if (row < M)" in out.text
    assert "row_mean_persistent<<<M, 128" in out.text
    _, wl = fixture("tile_size", "row_mean")
    assert_passes(out.text, wl, tmp_path, "row_mean_per_block.cu")
