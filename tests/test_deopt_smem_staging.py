"""smem_staging: shared-memory tiles (GEMM A/B tiles, transpose tile) -> direct global loads."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from klineage.deopt.base import Refused
from klineage.deopt.smem_staging import SmemStaging
from klineage.source.model import CudaSource
from tests.deopt_kernel_checks import load, one_site, passes_gate

OP = SmemStaging()
REPO = Path(__file__).resolve().parents[1]


def test_gemm_tiles_become_global_loads(tmp_path: Path) -> None:
    src, wl = load("smem_staging", "sgemm_tiled")
    a_site = one_site(OP, src, array="As")
    assert all(f.holds for f in OP.removal_preconditions(src, a_site))
    no_a = OP.remove(src, a_site)
    assert "As" not in no_a.text and no_a.text.count("__syncthreads();") == 2  # Bs still needs them
    no_ab = OP.remove(no_a, one_site(OP, no_a, array="Bs"))
    assert "__shared__" not in no_ab.text and "__syncthreads" not in no_ab.text
    assert "A[(size_t)(blockIdx.y * T + (ty)) * K + k0 + (k)]" in no_ab.text
    assert "B[(size_t)(k0 + (k)) * N + (blockIdx.x * T + (tx))]" in no_ab.text
    passes_gate(no_ab.text, wl, tmp_path)


@pytest.mark.slow
def test_gemm_half_way_state_passes_gate(tmp_path: Path) -> None:
    src, wl = load("smem_staging", "sgemm_tiled")
    passes_gate(OP.remove(src, one_site(OP, src, array="As")).text, wl, tmp_path)


@pytest.mark.slow
def test_transpose_tile_becomes_a_strided_read(tmp_path: Path) -> None:
    src, wl = load("smem_padding", "transpose_pad")
    out = OP.remove(src, one_site(OP, src, array="tile"))
    assert "tile[" not in out.text and "x[(size_t)(row0 + (tx) + 0) * N + (col0 + (ty + k))]" in out.text
    passes_gate(out.text, wl, tmp_path)


@pytest.mark.parametrize(
    "body, reason",
    [
        (
            "t[threadIdx.x] = x[threadIdx.x]; __syncthreads(); t[threadIdx.x] += 1.0f; y[0] = t[5];",
            "updated in place",
        ),
        ("t[threadIdx.x] = x[threadIdx.x]; y[threadIdx.x] = t[31 - threadIdx.x];", "no __syncthreads"),
        (
            "t[threadIdx.x / 2] = x[threadIdx.x]; __syncthreads(); y[threadIdx.x] = t[0];",
            "not a thread index",
        ),
        (
            "t[threadIdx.x] = x[threadIdx.x]; t[threadIdx.x + 32] = x[threadIdx.x + 32]; __syncthreads(); y[0] = t[1];",
            "written 2 times",
        ),
    ],
)
def test_refusals(body: str, reason: str) -> None:
    src = CudaSource.from_text(
        f"__global__ void k(const float* x, float* y) {{\n  __shared__ float t[64];\n  {body}\n}}\n"
    )
    site = one_site(OP, src, array="t")
    assert reason in site.details["reason"]
    with pytest.raises(Refused, match=reason):
        OP.remove(src, site)


def test_reduction_scratch_is_not_a_staging_site() -> None:
    src = CudaSource.from_text(
        "__global__ void k(const float* x, float* y) {\n  __shared__ float part[32];\n  float v = x[threadIdx.x] * 2.0f;\n"
        "  part[threadIdx.x % 32] = v;\n  __syncthreads();\n  if (threadIdx.x == 0) y[0] = part[0] + part[1];\n}\n"
    )
    assert OP.find(src) == []


# ---- forward: a naive strided copy becomes a tiled transpose ------------------------------------


@pytest.mark.parametrize(
    "fixture",
    [("smem_padding", "transpose_pad", "naive_2d_grid.cu"), ("smem_staging", "nchw_to_nhwc", "naive.cu")],
)
def test_forward_tiles_a_naive_permute_then_padding_applies(
    fixture: tuple[str, str, str], tmp_path: Path
) -> None:
    from klineage.deopt.smem_padding import SmemPadding

    src, wl = load(*fixture)
    (site,) = OP.find_forward(src)
    assert all(f.holds for f in OP.preconditions(src, site)), OP.preconditions(src, site)
    tiled = OP.apply(src, site)
    assert "__shared__ float tile[32][32];" in tiled.text and "dim3(32, 8)" in tiled.text
    assert "shorter than a tile: one element per thread" in tiled.text  # the emu shapes run both paths
    assert "const int threads" not in tiled.text and "dim3 grid(" not in tiled.text  # dead launcher locals go
    assert [s.details["array"] for s in OP.find(tiled)] == ["tile"]  # the backward step sees it again
    pad = SmemPadding()
    (pad_site,) = pad.find_forward(tiled)
    padded = pad.apply(tiled, pad_site)
    assert "tile[32][32 + 1]" in padded.text
    passes_gate(padded.text, wl, tmp_path)


def test_forward_refuses_a_copy_without_a_strided_side() -> None:
    src = CudaSource.from_text(
        "__global__ void k(const float* x, float* y, int n) {\n  int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
        "  if (i < n) { y[i] = x[i]; }\n}\n"
        'extern "C" void launch(const float* x, float* y, int n) { k<<<(n + 255) / 256, 256>>>(x, y, n); }\n'
    )
    (site,) = OP.find_forward(src)
    with pytest.raises(Refused, match="strided_pair"):
        OP.apply(src, site)


def test_no_forward_site_on_the_destaged_expert() -> None:
    """The transpose expert without its tile is a template with loops: not a one-element copy, so
    the walker's roundtrip of this step stays 'no mechanical forward site', never a failure."""
    src = CudaSource.from_file(
        Path(__file__).resolve().parents[1] / "expert_kernels" / "transpose" / "expert.cu"
    )
    destaged = OP.remove(src, one_site(OP, src, array="tile"))
    assert OP.find_forward(destaged) == []


@pytest.mark.parametrize(
    "bounds, holds", [("", True), ("__launch_bounds__(256) ", True), ("__launch_bounds__(128) ", False)]
)
def test_forward_respects_launch_bounds(bounds: str, holds: bool) -> None:
    src = CudaSource.from_text(
        f"__global__ void {bounds}k(const float* x, float* y, int M, int N) {{\n"
        "  size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;\n  if (i >= (size_t)M * N) return;\n"
        "  y[i] = x[(i % M) * N + i / M];\n}\n"
        'extern "C" void launch(const float* x, float* y, int M, int N) { k<<<(M * N + 127) / 128, 128>>>(x, y, M, N); }\n'
    )
    (site,) = OP.find_forward(src)
    facts = {f.name: f.holds for f in OP.preconditions(src, site)}
    assert facts["launch_bounds_cover_block"] is holds and facts["strided_pair"]


TINY_BATCHED = """
#include <cuda_runtime.h>
__global__ void flip(const float* in, float* out, int nb, int h, int w) {
    long long t = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (t < (long long)nb * h * w) {
        long long i = t % h;
        long long j = (t / h) % w;
        long long b = t / ((long long)h * w);
        out[t] = in[(b * h + i) * w + j];
    }
}
extern "C" void launch(const float* in, float* out, int nb, int h, int w, cudaStream_t s) {
    long long n = (long long)nb * h * w;
    flip<<<(unsigned)((n + 127) / 128), 128, 0, s>>>(in, out, nb, h, w);
}
"""


@given(
    h=st.integers(min_value=1, max_value=96),
    w=st.integers(min_value=1, max_value=96),
    nb=st.integers(min_value=1, max_value=1 << 22),
)
@settings(max_examples=40, deadline=None)
def test_the_tile_is_refused_at_sizes_where_it_never_runs(h: int, w: int, nb: int) -> None:
    """Batched matrices narrower than the tile take only the one-element path of the tiled kernel,
    more index work than the naive copy (transpose_tiny_batched, 5 x 7: 0.87x naive on the H200).
    With the bench sizes the step is refused exactly when every size has an extent below the tile;
    without sizes (mining) only the static facts count."""
    from klineage.deopt.strided_copy import TILE
    from klineage.materialize.matching import site_problem

    op = SmemStaging()
    src = CudaSource.from_text(TINY_BATCHED, "flip.cu")
    (site,) = op.find_forward(src)
    assert site_problem(op, src, site) is None
    why = site_problem(op, src, site, [(None, None, nb, h, w)])
    assert (why is not None) == (min(h, w) < TILE), why
    assert site_problem(op, src, site, [(None, None, nb, h, w), (None, None, 2, 64, 64)]) is None


def test_bench_launch_values_follow_the_protocol_order() -> None:
    from klineage.materialize.matching import bench_launch_values
    from klineage.workload import load_workload

    wl = load_workload(REPO / "heldout" / "transpose_tiny_batched")
    assert bench_launch_values(wl) == ((None, None, 4194304, 5, 7),)
