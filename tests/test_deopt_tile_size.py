"""tile_size: compile-time block/tile sizes -> the next smaller power of two (>= 32), and back."""

from __future__ import annotations

from pathlib import Path

import pytest
from deopt_parallel_checks import assert_passes, fixture, only_site

from klineage.deopt.base import Refused
from klineage.deopt.tile_size import TileSize, smaller
from klineage.source.model import CudaSource

OP = TileSize()


def test_smaller_halves_down_to_a_warp() -> None:
    assert [smaller(v) for v in (1024, 256, 128, 64, 96)] == [512, 128, 64, 32, 64]


def test_find_constant_and_template_sizes() -> None:
    src, _ = fixture("tile_size", "row_mean")
    got = [
        (s.details["kind"], s.details["name"], s.details["original"], s.details["chosen"])
        for s in OP.find(src)
    ]
    assert got == [("constexpr", "kThreads", "256", "128"), ("template", "BLOCK", "256", "128")]


@pytest.mark.parametrize("kind", ["constexpr", "template"])
def test_remove_passes_and_roundtrips(kind: str, tmp_path: Path) -> None:
    src, wl = fixture("tile_size", "row_mean")
    site = only_site(OP, src, kind=kind)
    out = OP.remove(src, site)
    if kind == "template":
        assert "row_sum_tree<128><<<M, 128, 0, stream>>>" in out.text  # template arg and block together
    else:
        assert "constexpr int kThreads = 128;" in out.text
    (fwd,) = [f for f in OP.find_forward(out) if f.details["name"] == site.details["name"]]
    assert OP.apply(out, fwd).text == src.text  # the forward step restores the expert's value exactly
    assert_passes(out.text, wl, tmp_path, f"row_mean_{kind}.cu")


def test_forward_refuses_more_than_1024_threads() -> None:
    src = CudaSource.from_text("""constexpr int kBlockThreads = 1024;
__global__ void k(float* y) { y[blockIdx.x * kBlockThreads + threadIdx.x] = 0.f; }
extern "C" void launch(float* y, int n, cudaStream_t s) { k<<<n / kBlockThreads, kBlockThreads, 0, s>>>(y); }
""")
    (fwd,) = OP.find_forward(src)
    assert fwd.details["chosen"] == "2048"
    with pytest.raises(Refused, match="block_multiple_of_32"):
        OP.apply(src, fwd)


def test_scratch_counts_are_not_sizes() -> None:
    src = CudaSource.from_text("constexpr int kMaxPartials = 2048;\nconstexpr int kSmemBytes = 4096;\n")
    assert OP.find(src) == []


UNREAD = """
#define THREAD_PER_BLOCK 256
#define TILE_ROWS 64
#define TILE_ELEMS (TILE_ROWS * 4)
// THREAD_PER_BLOCK is the block the old version used
template <unsigned int blockSize>
__global__ void sums(const float* in, float* out) {
    __shared__ float buf[TILE_ELEMS];
    buf[threadIdx.x] = in[blockIdx.x * blockSize + threadIdx.x];
    __syncthreads();
    if (threadIdx.x == 0) out[blockIdx.x] = buf[0] + buf[blockSize - 1];
}
extern "C" void launch(const float* in, float* out, int n, cudaStream_t s) {
    sums<128><<<n / 128, 128, 0, s>>>(in, out);
}
"""


def test_refuses_a_size_nothing_reads() -> None:
    """A leftover `#define` no code reads (only a comment names it): changing it changes no
    kernel, so it is no tuning step. A size read only through another macro is still read."""
    op = TileSize()
    src = CudaSource.from_text(UNREAD)
    by_name = {s.details["name"]: s for s in op.find(src)}
    with pytest.raises(Refused, match="size_is_read"):
        op.remove(src, by_name["THREAD_PER_BLOCK"])
    assert "#define TILE_ROWS 32" in op.remove(src, by_name["TILE_ROWS"]).text
