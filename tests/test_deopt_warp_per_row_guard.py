"""A warp-per-row kernel in llm.c's online-softmax idiom, written here: the block's threads are
tested against the row length (`if (t >= N) return;`) ahead of the warp's shuffles, the row reads
the warp's index through a local, and the lanes merge (max, sum) pairs in a shuffle-down loop and
take lane 0's pair. canon `warp_uniform_lane_guard` reads the guard as the warp's (a split warp
would leave lanes in a full-mask collective with exited lanes: undefined), and warp_per_row's
removal reads the rest; both directions pass the emu gate."""

from __future__ import annotations

from pathlib import Path

import pytest

from klineage.deopt.warp_per_row import WarpPerRow
from klineage.gates.backend import GateOptions
from klineage.gates.gate import gate
from klineage.source.canon import canonical_form
from klineage.source.canon.lane_guard import WarpUniformLaneGuard
from klineage.source.model import CudaSource
from klineage.source.text import normalize

OP = WarpPerRow()
DATA = Path(__file__).resolve().parent / "data" / "deopt" / "warp_per_row" / "guarded_rows"
EXPERT = (DATA / "expert.cu").read_text()

K = """__global__ void k(const float* x, float* y, int M, int N) {{
    const int wpb = blockDim.x / 32;
    {guard}
    int lane = threadIdx.x % 32;
    int row = blockIdx.x * wpb + threadIdx.x / 32;
    {between}
    float v = x[row * N + lane];
    {merge}
    y[row] = v;
}}"""
GUARD = "if (threadIdx.x >= N) return;"
MERGE = "v = __shfl_sync(0xffffffff, v, 0);"


def _rw(text: str) -> str:
    out = WarpUniformLaneGuard().rewrite(CudaSource.from_text(text))
    return normalize(out.text) if out is not None else "UNCHANGED"


def _failed(src: CudaSource) -> dict[str, str]:
    (site,) = OP.find(src)
    return {f.name: f.reason for f in OP.removal_preconditions(src, site) if not f.holds}


def test_the_lane_guard_tests_the_warps_first_lane() -> None:
    text = K.format(guard=GUARD, between="if (row >= M) return;", merge=MERGE)
    want = K.format(
        guard="if (threadIdx.x / 32 * 32 >= N) return;", between="if (row >= M) return;", merge=MERGE
    )
    assert _rw(text) == normalize(want)


@pytest.mark.parametrize(
    ("guard", "between", "merge"),
    [
        (GUARD, "", "if (lane < 16) v = __shfl_sync(0xffffffff, v, 0);"),  # the collective under a branch
        (GUARD, "", "v = __shfl_sync(0x0000ffff, v, 0);"),  # not the full warp
        (GUARD, "", "v = v * 2.f;"),  # no collective at all
        (GUARD, "if (lane == 3) return;", MERGE),  # a lane-dependent exit before it
        ("if (threadIdx.x >= N - threadIdx.y) return;", "", MERGE),  # the bound reads a thread index
        ("if (threadIdx.x >= N) { y[0] = 0.f; return; }", "", MERGE),  # more than an exit
    ],
)
def test_a_guard_it_cannot_read_as_the_warps_stays(guard: str, between: str, merge: str) -> None:
    assert _rw(K.format(guard=guard, between=between, merge=merge)) == "UNCHANGED"


def test_the_warp_index_read_beyond_the_row_needs_blocks_of_whole_warps() -> None:
    """With a row count per block that is not blockDim.x / 32, the warp a row had cannot be
    recovered from the row, so a warp-index read outside the row refuses the removal."""
    text = EXPERT.replace("const int rows_per_block = blockDim.x / 32;", "const int rows_per_block = 4;")
    src = canonical_form(CudaSource.from_text(text, "k.cu")).source
    assert "warp_index_of_the_row" in _failed(src)


def test_the_removal_reads_the_kernel_and_both_forms_pass_the_gate(tmp_path: Path) -> None:
    src = CudaSource.from_text(EXPERT, "expert.cu")
    assert OP.find(src) == [] or _failed(src)
    canon = canonical_form(src)
    assert "warp_uniform_lane_guard" in canon.applied
    opts = GateOptions(backend="emu")
    r = gate(canon.source.text, DATA, opts, name="canon.cu", use_cache=False, cache_root=tmp_path)
    assert r.accepted, (r.category, r.message)
    assert _failed(canon.source) == {}
    (site,) = OP.find(canon.source)
    out = OP.remove(canon.source, site)
    body = out.text.split("extern")[0]
    assert "__shfl" not in body and "__syncwarp" not in body
    assert "((blockIdx.x * blockDim.x + threadIdx.x) % (blockDim.x / 32)) * 32 >= N" in body
    r = gate(out.text, DATA, opts, name="rows.cu", use_cache=False, cache_root=tmp_path)
    assert r.accepted, (r.category, r.message)
