"""deep_micro_tile: a 4 x 4 register micro-tile (what gemm_tiling then register_blocking leave)
deepens to 8 x 8 with the block tile, threads kept, and halves back exactly; the emu gate accepts
the deep kernel on odd shapes."""

from __future__ import annotations

from pathlib import Path

from deopt_parallel_checks import DATA, assert_passes

from klineage.deopt.deep_micro_tile import DeepMicroTile
from klineage.deopt.gemm_tiling import GemmTiling
from klineage.deopt.register_blocking import RegisterBlocking
from klineage.source.model import CudaSource

OP = DeepMicroTile()
FIXTURE = DATA / "gemm_tiling" / "macro_swapped"


def _four_by_four() -> CudaSource:
    src = CudaSource.from_file(FIXTURE / "naive.cu")
    tiled = GemmTiling().apply(src, GemmTiling().find_forward(src)[0])
    rb = RegisterBlocking()
    return rb.apply(tiled, rb.find_forward(tiled)[0])


def test_deepens_to_eight_by_eight_and_back() -> None:
    src = _four_by_four()
    assert OP.find(src) == []
    (site,) = OP.find_forward(src)
    deep = OP.apply(src, site)
    for line in ("BM = 128;", "BN = 128;", "TM = 8;", "TN = 8;", "BK = 16;"):
        assert f"constexpr int kMm_macro_{line}" in deep.text
    assert OP.find_forward(deep) == [] and len(OP.find(deep)) == 1
    assert OP.remove(deep, OP.find(deep)[0]).text == src.text


def test_one_output_per_thread_is_register_blockings_site_not_this_one() -> None:
    src = CudaSource.from_file(FIXTURE / "naive.cu")
    tiled = GemmTiling().apply(src, GemmTiling().find_forward(src)[0])
    assert OP.find_forward(tiled) == [] and len(RegisterBlocking().find_forward(tiled)) == 1


def test_refused_when_the_grid_does_not_follow_the_block_tile() -> None:
    text = _four_by_four().text
    head, launch = text.split('extern "C"')
    launch = launch.replace(
        "dim3((n + kMm_macro_BN - 1) / kMm_macro_BN, (m + kMm_macro_BM - 1) / kMm_macro_BM)", "1024"
    )
    src = CudaSource.from_text(head + 'extern "C"' + launch, "k.cu")
    (site,) = OP.find_forward(src)
    failed = [f.name for f in OP.preconditions(src, site) if not f.holds]
    assert failed == ["grid_follows_block_tile"]


def test_deep_kernel_passes_the_emu_gate(tmp_path: Path) -> None:
    src = _four_by_four()
    deep = OP.apply(src, OP.find_forward(src)[0])
    assert_passes(deep.text, FIXTURE, tmp_path, "mm_macro_deep.cu")


_WIDE = """constexpr int kBM = 128;
constexpr int kBN = 128;
constexpr int kTM = 4;
constexpr int kTN = 4;
__global__ void g(const float* A, float* C, int M, int N) {
    float acc[kTM][kTN] = {};
    const int ty = threadIdx.x / (kBN / kTN), tx = threadIdx.x % (kBN / kTN);
    for (int i = 0; i < kTM; ++i) for (int j = 0; j < kTN; ++j) acc[i][j] += A[i] * A[j];
    C[(blockIdx.y * kBM + ty * kTM) * N + blockIdx.x * kBN + tx * kTN] = acc[0][0];
}
extern "C" void launch(const float* A, float* C, int M, int N, cudaStream_t s) {
    g<<<dim3((N + kBN - 1) / kBN, (M + kBM - 1) / kBM), (kBM / kTM) * (kBN / kTN), 0, s>>>(A, C, M, N);
}
"""


def test_refused_past_the_register_file() -> None:
    """1024 threads with 64 accumulators each would not launch: refused before the gate."""
    src = CudaSource.from_text(_WIDE, "g.cu")
    (site,) = OP.find_forward(src)
    (fact,) = [f for f in OP.preconditions(src, site) if not f.holds]
    assert fact.name == "register_budget" and "1024 threads" in fact.reason
    small = CudaSource.from_text(
        _WIDE.replace("kBM = 128", "kBM = 32").replace("kBN = 128", "kBN = 32"), "g.cu"
    )
    (site,) = OP.find_forward(small)
    assert all(f.holds for f in OP.preconditions(small, site))
