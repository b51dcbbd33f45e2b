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
