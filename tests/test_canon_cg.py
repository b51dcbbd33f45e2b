"""cg_tile_spelling and host_arg_to_constexpr: a warp-per-row kernel written with a cooperative-
groups tile, launched through a host helper that takes the block size, reads as the hand-written
warp per row warp_per_row removes; what the rules must leave alone stays."""

from __future__ import annotations

from pathlib import Path

import pytest
from deopt_parallel_checks import assert_passes

from klineage.deopt.rows import BLOCK_COOP
from klineage.deopt.warp_per_row import WarpPerRow
from klineage.source.canon import canonical_form
from klineage.source.canon.cg_tiles import CgTileSpelling
from klineage.source.canon.host_args import HostArgToConstexpr
from klineage.source.model import CudaSource

DATA = Path(__file__).parent / "data" / "canon" / "tile_rows"
OP = WarpPerRow()


def _expert() -> CudaSource:
    return CudaSource.from_file(DATA / "expert.cu")


def _holds(src: CudaSource) -> list[str]:
    return [s.anchor.function for s in OP.find(src) if all(f.holds for f in OP.removal_preconditions(src, s))]


def test_tile_members_read_as_built_ins() -> None:
    out = CgTileSpelling().rewrite(_expert())
    assert out is not None
    t = out.text
    assert "const int lane = threadIdx.x % 32;" in t
    assert "blockIdx.x * ((blockDim.x + 31) / 32) + (threadIdx.x / 32)" in t
    assert "for (int c = lane; c < N; c += 32)" in t
    assert "acc += __shfl_xor_sync(0xffffffffu, acc, off);" in t and "if (lane == 0)" in t
    assert "tile.thread_rank" not in t and CgTileSpelling().rewrite(out) is None


def test_host_argument_fixed_at_every_call_becomes_constexpr() -> None:
    out = HostArgToConstexpr().rewrite(_expert())
    assert out is not None
    assert "constexpr int threads = 128;" in out.text
    assert "int threads," not in out.text and "run_rows(x, y, M, N, stream);" in out.text


def test_canonical_form_opens_warp_per_row(tmp_path: Path) -> None:
    src = _expert()
    assert _holds(src) == []
    canon = canonical_form(src).source
    assert _holds(canon) == ["tile_rows"]
    assert_passes(canon.text, DATA, tmp_path, "canonical.cu")
    (site,) = OP.find(canon)
    one = OP.remove(canon, site)
    assert "for (int c = 0; c < N; ++c)" in one.text
    assert_passes(one.text, DATA, tmp_path, "thread_per_row.cu")


def test_inert_group_declarations_are_not_block_cooperation() -> None:
    decls = (
        "namespace cg = cooperative_groups;\n"
        "cg::thread_block block = cg::this_thread_block();\n"
        "cg::thread_block_tile<32> warp = cg::tiled_partition<32>(block);\n"
    )
    assert BLOCK_COOP.search(decls) is None
    assert BLOCK_COOP.search(decls + "block.sync();") is not None
    assert BLOCK_COOP.search(decls + "cg::sync(block);") is not None
    assert BLOCK_COOP.search(decls + "__shared__ float s[32];") is not None


_K = """#include <cooperative_groups.h>
namespace cg = cooperative_groups;
__global__ void k(float* y) {{
    auto w = cg::tiled_partition<32>(cg::this_thread_block());
    y[threadIdx.x{axis}] = w.thread_rank();
}}
static void go(float* y, int t{extra_param}) {{ k<<<1, {block}>>>(y); }}
extern "C" void launch(float* y) {{ go(y, {arg}{extra_arg}); }}
"""


@pytest.mark.parametrize(
    ("rule", "fields"),
    [
        (CgTileSpelling(), {"axis": " + threadIdx.y"}),  # a 2-D block: the rank is not threadIdx.x % 32
        (CgTileSpelling(), {"block": "dim3(32, 2)"}),
        (HostArgToConstexpr(), {"arg": "n"}),  # not a literal
        (
            HostArgToConstexpr(),
            {"extra_param": "", "arg": "64", "extra_arg": "); go(y, 32"},
        ),  # calls disagree
    ],
    ids=["2d-index", "dim3-block", "not-literal", "calls-disagree"],
)
def test_left_alone(rule, fields: dict[str, str]) -> None:
    f = {"axis": "", "extra_param": "", "block": "t", "arg": "64", "extra_arg": ""} | fields
    text = _K.format(**f).replace("launch(float* y)", "launch(float* y, int n)")
    assert rule.rewrite(CudaSource.from_text(text, "k.cu")) is None


@pytest.mark.parametrize("rule", [CgTileSpelling(), HostArgToConstexpr()], ids=lambda r: r.name)
def test_the_left_alone_kernel_is_rewritten_as_written(rule) -> None:
    f = {"axis": "", "extra_param": "", "block": "t", "arg": "64", "extra_arg": ""}
    text = _K.format(**f).replace("launch(float* y)", "launch(float* y, int n)")
    assert rule.rewrite(CudaSource.from_text(text, "k.cu")) is not None
