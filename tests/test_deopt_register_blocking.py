"""register_blocking: TM x TN register micro-tile -> one output per thread (block tile shrinks,
thread count kept, grid follows), and back."""

from __future__ import annotations

from pathlib import Path

import pytest
from deopt_parallel_checks import assert_passes, fixture, only_site

from klineage.deopt.base import Refused
from klineage.deopt.register_blocking import RegisterBlocking
from klineage.source.model import CudaSource

OP = RegisterBlocking()


def test_find_micro_tile() -> None:
    src, _ = fixture("register_blocking", "sgemm")
    (site,) = OP.find(src)
    assert (site.details["acc"], site.details["tm"], site.details["tn"]) == ("acc", "kTM", "kTN")
    assert all(f.holds for f in OP.removal_preconditions(src, site))


def test_remove_one_output_per_thread(tmp_path: Path) -> None:
    src, wl = fixture("register_blocking", "sgemm")
    out = OP.remove(src, only_site(OP, src))
    for line in ("kBM = 16;", "kBN = 16;", "kTM = 1;", "kTN = 1;", "kBK = 8;"):
        assert f"constexpr int {line}" in out.text
    assert OP.find(out) == [] and len(OP.find_forward(out)) == 1
    assert_passes(out.text, wl, tmp_path, "sgemm_one_output.cu")


def test_apply_restores_expert_exactly() -> None:
    src, _ = fixture("register_blocking", "sgemm")
    out = OP.remove(src, only_site(OP, src))
    (fwd,) = OP.find_forward(out)
    assert OP.apply(out, fwd).text == src.text


_GEMM = """constexpr int kBM = {bm};
constexpr int kBN = 64;
constexpr int kTM = {tm};
constexpr int kTN = 4;
__global__ void g(const float* A, float* C, int M, int N) {{
    float acc[kTM][kTN] = {{}};
    const int ty = threadIdx.x / (kBN / kTN), tx = threadIdx.x % (kBN / kTN);
    for (int i = 0; i < kTM; ++i) for (int j = 0; j < kTN; ++j) acc[i][j] += A[i] * A[j];
    C[(blockIdx.y * kBM + ty * kTM) * N + blockIdx.x * kBN + tx * kTN] = acc[0][0];
}}
extern "C" void launch(const float* A, float* C, int M, int N, cudaStream_t s) {{
    g<<<{grid}, (kBM / kTM) * (kBN / kTN), 0, s>>>(A, C, M, N);
}}
"""


@pytest.mark.parametrize(
    ("bm", "tm", "grid", "fact"),
    [
        (64, 3, "dim3((N + kBN - 1) / kBN, (M + kBM - 1) / kBM)", "block_tile_divisible"),
        (64, 4, "dim3(N / 64, M / 64)", "grid_follows_block_tile"),
    ],
)
def test_refusals(bm: int, tm: int, grid: str, fact: str) -> None:
    src = CudaSource.from_text(_GEMM.format(bm=bm, tm=tm, grid=grid), "g.cu")
    (site,) = OP.find(src)
    with pytest.raises(Refused, match=fact):
        OP.remove(src, site)


def test_refuses_literal_template_sizes(repo: Path) -> None:
    src = CudaSource.from_file(repo / "tests/data/source/gemm_tiled.cu")
    (site,) = OP.find(src)
    with pytest.raises(Refused, match="micro_tile_constant"):
        OP.remove(src, site)


def test_thread_count_written_as_the_tile_area(tmp_path: Path) -> None:
    """`kBM * kBN / (kTM * kTN)` threads, rows at `blockIdx.y * kBM`: kBM pairs with kTM by the
    axis (not with the kBN that `/ (kTM * kTN)` follows), and both block sizes shrink."""
    src, wl = fixture("register_blocking", "product_threads")
    out = OP.remove(src, only_site(OP, src))
    for line in ("kBM = 16;", "kBN = 16;", "kTM = 1;", "kTN = 1;"):
        assert f"constexpr int {line}" in out.text
    assert_passes(out.text, wl, tmp_path, "area_one_output.cu")
    (fwd,) = OP.find_forward(out)
    assert OP.apply(out, fwd).text == src.text


def test_an_aggregate_initialised_accumulator_is_read_by_the_untiling() -> None:
    """`float acc[kTM][kTN] = {0.f};` is the accumulator array, not a pointer into one."""
    from klineage.deopt.gemm_tiling import GemmTiling

    src, _ = fixture("register_blocking", "product_threads")
    text = src.text
    for old, new in (
        ("kBM = 64", "kBM = 16"),
        ("kBN = 64", "kBN = 16"),
        ("kTM = 4", "kTM = 1"),
        ("kTN = 4", "kTN = 1"),
    ):
        text = text.replace(old, new)
    one = CudaSource.from_text(text, "one.cu")
    (site,) = GemmTiling().find(one)
    naive = GemmTiling().remove(one, site)
    assert "__shared__" not in naive.text


def test_a_one_d_column_tile_goes_to_one_output_per_thread(tmp_path: Path) -> None:
    """1-D thread tiling (`float acc[kTM]`, kBN * kBM / kTM threads): read as a kTM x 1 micro-tile;
    the removal sets kTM to 1 and shrinks kBM with it (threads kept), and the emu gate accepts it."""
    src, _ = fixture("register_blocking", "column_tile")
    _, wl = fixture("register_blocking", "product_threads")  # the same GEMM contract
    (site,) = OP.find(src)
    assert (site.details["tm"], site.details["tn"]) == ("kTM", "1")
    out = OP.remove(src, site)
    for line in ("kBM = 8;", "kBN = 64;", "kTM = 1;", "kBK = 8;"):
        assert f"constexpr int {line}" in out.text
    assert OP.find(out) == []
    assert_passes(out.text, wl, tmp_path, "column_one_output.cu")
