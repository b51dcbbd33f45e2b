"""The row layouts' shape rules at the workload's bench sizes (klineage/deopt/row_shape.py,
block_shape.py): a block per row sized from the row length, a warp only for rows it fits, a
block-size constant only at values that leave the GPU work, and the offline provider passing the
bench sizes to every forward step. Kernels: the project's held-out softmax_long naive and small
kernels written here."""

from __future__ import annotations

from pathlib import Path

import pytest

from klineage.deopt.registry import get_operator
from klineage.deopt.row_shape import MAX_BLOCK, block_for_row
from klineage.gates.backend import GateOptions
from klineage.gates.gate import gate
from klineage.materialize.providers.base import Move, ProposalRequest
from klineage.materialize.providers.offline import OfflineProvider
from klineage.source.canon import canonical_form
from klineage.source.model import CudaSource
from klineage.workload import load_workload

REPO = Path(__file__).resolve().parent.parent
LONG = REPO / "heldout" / "softmax_long"
BPR, WPR, TILE = get_operator("block_per_row"), get_operator("warp_per_row"), get_operator("tile_size")
LONG_BENCH = [(None, None, 512, 131072)]


def _long() -> CudaSource:
    return canonical_form(CudaSource.from_file(LONG / "naive.cu")).source


def _facts(op, src: CudaSource, site, bench) -> dict[str, str]:  # type: ignore[no-untyped-def]
    return {f.name: f.reason for f in op.shape_preconditions(src, site, bench) if not f.holds}


def test_block_for_row_keeps_a_block_that_fits_and_grows_one_that_does_not() -> None:
    assert [block_for_row(4096, b) for b in (128, 256)] == [128, 256]  # 32 and 16 a thread
    assert block_for_row(8192, 128) == 128  # 64 a thread: the limit
    assert block_for_row(32000, 128) == 512
    assert block_for_row(131072, 64) == MAX_BLOCK  # 128 a thread, streamed by the loop
    assert block_for_row(1 << 24, 1024) == 1024


def test_a_long_row_takes_a_block_sized_for_it() -> None:
    src = _long()
    (site,) = BPR.find_forward(src)
    sized = BPR.apply(src, site, LONG_BENCH)
    assert "constexpr int threads = 1024;" in sized.text
    assert "softmax_long_naive<<<M, threads, 0, stream>>>" in sized.text
    assert "j += blockDim.x" in sized.text  # a block-strided loop streams the row
    plain = BPR.apply(src, site)
    assert "constexpr int threads = 64;" in plain.text  # no bench sizes: the launch's block
    assert BPR.apply(src, site, [(None, None, 512, 4096)]).text == plain.text  # 64 a thread: kept


def test_a_block_named_by_a_shared_local_is_written_at_the_launch() -> None:
    text = """
__global__ void k(const float* x, float* y, int M, int N) {
    int row = blockIdx.x * blockDim.x + threadIdx.x;
    if (row >= M) return;
    float s = 0.0f;
    for (int j = 0; j < N; ++j) s += x[(size_t)row * N + j];
    y[row] = s;
}
extern "C" void launch(const float* x, float* y, int M, int N, cudaStream_t st) {
    const int threads = 64;
    if (M > threads * 65535) return;  // the local is read outside the launch too
    k<<<(M + threads - 1) / threads, threads, 0, st>>>(x, y, M, N);
}
"""
    src = CudaSource.from_text(text, "k.cu")
    (site,) = BPR.find_forward(src)
    out = BPR.apply(src, site, [(None, None, 512, 131072)])
    assert "const int threads = 64;" in out.text and "k<<<M, 1024, 0, st>>>" in out.text


def test_the_sized_block_passes_the_emu_gate(tmp_path: Path) -> None:
    src = _long()
    (site,) = BPR.find_forward(src)
    sized = BPR.apply(src, site, LONG_BENCH)
    r = gate(
        sized.text, LONG, GateOptions(backend="emu"), name="sized.cu", use_cache=False, cache_root=tmp_path
    )
    assert r.accepted, (r.category, r.message)


@pytest.mark.parametrize(
    ("n", "refused"),
    [(4, "row_reaches_a_warp"), (131072, "row_fits_a_warp"), (4096, None), (8, None)],
)
def test_a_warp_takes_rows_it_fits(n: int, refused: str | None) -> None:
    src = _long()
    (site,) = WPR.find_forward(src)
    failed = _facts(WPR, src, site, [(None, None, 512, n)])
    assert list(failed) == ([refused] if refused else []), failed


def test_a_larger_block_that_leaves_sms_idle_is_refused() -> None:
    """softmax_long's naive: 512 rows, a thread each, in blocks of 64 (8 blocks); 128 halves the
    grid below one block per SM. At a million rows the same step leaves the SMs work."""
    src = _long()
    (site,) = TILE.find_forward(src)
    assert "grid 8 -> 4 blocks" in _facts(TILE, src, site, LONG_BENCH)["block_fits_the_shape"]
    assert _facts(TILE, src, site, [(None, None, 1 << 20, 16)]) == {}


def test_a_block_larger_than_the_row_is_refused() -> None:
    src = _long()
    (row,) = BPR.find_forward(src)
    block = BPR.apply(src, row)  # a block of 64 per row
    (site,) = TILE.find_forward(block)
    assert site.details["chosen"] == "128"
    assert "extent 96" in _facts(TILE, block, site, [(None, None, 512, 96)])["block_fits_the_shape"]
    assert _facts(TILE, block, site, [(None, None, 512, 4096)]) == {}


def _proposal(op_name: str) -> str | None:
    op = get_operator(op_name)
    move = Move(f"op:{op_name}", None, op, ())
    req = ProposalRequest(load_workload(LONG), _long().text, move)
    return OfflineProvider().propose(req).source


def test_the_offline_provider_sizes_for_the_workload() -> None:
    """The provider passes the workload's bench sizes: block_per_row sizes its block; tile_size
    does not double softmax_long's block of 64 up to 1024 (every value halves its 8 blocks)."""
    sized = _proposal("block_per_row")
    assert sized is not None and "constexpr int threads = 1024;" in sized
    assert _proposal("tile_size") is None


def test_the_cpu_judge_keeps_a_block_grown_for_long_rows() -> None:
    """A kernel that is a block per row already, with a block of 64 (2048 elements a thread at
    softmax_long's size): tile_size's candidate is kept by the CPU judge for its shape effect;
    at rows of 4096 (64 a thread) the same candidate has no effect the judge can see."""
    from klineage.gates.result import GateResult
    from klineage.materialize.judge import judge
    from klineage.materialize.providers.offline import apply_everywhere

    src = _long()
    (row,) = BPR.find_forward(src)
    block = BPR.apply(src, row)
    grown, done, _ = apply_everywhere(TILE, block, LONG_BENCH)
    assert done and "constexpr int threads = 1024;" in grown.text
    ok = GateResult(True, "done", "ok")
    v = judge(block.text, grown.text, ok, ok, TILE, LONG_BENCH)
    assert v.kept and "2048 -> 128" in v.reason, v.reason
    assert judge(block.text, grown.text, ok, ok, TILE, [(None, None, 512, 4096)]).verdict == "no_effect"
    assert judge(block.text, grown.text, ok, ok, TILE).verdict == "no_effect"
