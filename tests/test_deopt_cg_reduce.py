"""cg_reduce: cooperative-groups reductions -> plain warp-shuffle loops, and back to cg::reduce."""

from __future__ import annotations

from pathlib import Path

import pytest
from deopt_parallel_checks import assert_passes, fixture

from klineage.deopt.base import Refused
from klineage.deopt.cg_reduce import CgReduce
from klineage.deopt.warp_shuffle_reduce import WarpShuffleReduce
from klineage.source.model import CudaSource

OP = CgReduce()


def test_find_reduce_and_tile_shuffles() -> None:
    src, _ = fixture("cg_reduce", "row_sum_max")
    got = [(s.details["form"], s.details["op"], s.details["tile"]) for s in OP.find(src)]
    assert got == [("reduce", "plus", "32"), ("shfl_loop", "?", "32")]


def test_remove_both_then_warp_shuffle_sees_them(tmp_path: Path) -> None:
    src, wl = fixture("cg_reduce", "row_sum_max")
    cur = src
    for _ in range(2):
        cur = OP.remove(cur, OP.find(cur)[0])
    assert OP.find(cur) == [] and "cg::reduce" not in cur.text and ".shfl_down" not in cur.text
    # the lowered loops are exactly what warp_shuffle_reduce removes next
    kinds = sorted(s.details["kind"] for s in WarpShuffleReduce().find(cur))
    assert kinds == ["down", "xor"]
    assert_passes(cur.text, wl, tmp_path, "row_sum_max_shfl.cu")


def test_apply_roundtrip(tmp_path: Path) -> None:
    src, wl = fixture("cg_reduce", "row_sum_max")
    cur = src
    for _ in range(2):
        cur = OP.remove(cur, OP.find(cur)[0])
    for _ in range(2):
        cur = OP.apply(cur, OP.find_forward(cur)[0])
    assert [s.details["op"] for s in OP.find(cur)] == ["plus", "greater"]
    assert_passes(cur.text, wl, tmp_path, "row_sum_max_cg_again.cu")


def test_refuses_dynamic_tile_and_custom_op() -> None:
    src = CudaSource.from_text("""#include <cooperative_groups.h>
#include <cooperative_groups/reduce.h>
namespace cg = cooperative_groups;
struct MyOp { __device__ float operator()(float a, float b) const { return a + b; } };
__device__ float f(cg::thread_group g, float v) { return cg::reduce(g, v, cg::plus<float>()); }
__device__ float h(float v) {
    auto t = cg::tiled_partition<16>(cg::this_thread_block());
    return cg::reduce(t, v, MyOp());
}
""")
    dyn, custom = OP.find(src)
    with pytest.raises(Refused, match="static_tile"):
        OP.remove(src, dyn)
    with pytest.raises(Refused, match="known_operator"):
        OP.remove(src, custom)
