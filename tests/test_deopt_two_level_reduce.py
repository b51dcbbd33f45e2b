"""two_level_reduce: a block reduced in two levels (per warp, then one slot per warp) <-> one
shared-memory tree over every thread of the block."""

from __future__ import annotations

from pathlib import Path

import pytest
from deopt_parallel_checks import assert_passes

from klineage.deopt.base import Refused
from klineage.deopt.tree_addressing import TreeAddressing
from klineage.deopt.two_level_reduce import TwoLevelReduce
from klineage.source.model import CudaSource

OP = TwoLevelReduce()
DATA = Path(__file__).resolve().parent / "data" / "deopt"
#: the kernel, and the workload it shares with load_add's fixture (sums of 256-element chunks)
KERNEL, WORKLOAD = DATA / "two_level_reduce" / "first_warp.cu", DATA / "load_add" / "warp_chunk"


def test_first_warp_form_becomes_one_tree_and_back(tmp_path: Path) -> None:
    """Warp sums, a slot per warp, the first warp folds: one block-wide sequential tree (which
    tree_addressing can then take further), and forward the every-thread two-level form."""
    src, folder = CudaSource.from_file(KERNEL), WORKLOAD
    (site,) = OP.find(src)
    assert all(p.holds for p in OP.removal_preconditions(src, site))
    tree = OP.remove(src, site)
    assert "__shared__ float kl_tree[256];" in tree.text and "x = kl_tree[0];" in tree.text
    assert "if (wid == 0)" not in tree.text and OP.find(tree) == []
    assert [s.summary for s in TreeAddressing().find(tree)] == [
        "sequential tree over kl_tree[blockDim.x] (sum)"
    ]
    assert_passes(tree.text, folder, tmp_path)
    (fwd,) = OP.find_forward(tree)
    again = OP.apply(tree, fwd)
    assert "x += __shfl_xor_sync(0xffffffffu, x, kl_off);" in again.text and "kl_tree" not in again.text
    (back,) = OP.find(again)
    assert "every thread folds" in back.summary
    assert_passes(again.text, folder, tmp_path, "again.cu")
    assert "kl_tree[threadIdx.x] = x;" in OP.remove(again, back).text


@pytest.mark.parametrize(
    ("edit", "fact"),
    [
        (
            ("if (threadIdx.x == 0) dst[blockIdx.x] = x;", "dst[blockIdx.x * 256 + threadIdx.x] = x;"),
            "thread0_reads_result",
        ),
        (
            (
                "x += __shfl_down_sync(0xffffffffu, x, 16);",
                "x = fmaxf(x, __shfl_down_sync(0xffffffffu, x, 16));",
            ),
            "sum_combine",
        ),
        (("chunk_sum<<<B, 256, 0, stream>>>", "chunk_sum<<<B, 96, 0, stream>>>"), "power_of_two_block"),
    ],
)
def test_removal_refusals(edit: tuple[str, str], fact: str) -> None:
    src = CudaSource.from_file(KERNEL)
    changed = CudaSource.from_text(src.text.replace(*edit))
    (site,) = OP.find(changed)
    assert {p.name for p in OP.removal_preconditions(changed, site) if not p.holds} == {fact}
    with pytest.raises(Refused, match=fact):
        OP.remove(changed, site)


def test_ranks_must_be_lane_and_warp() -> None:
    """`lane` must be the thread's lane and `wid` its warp: another split is not a two-level block sum."""
    src = CudaSource.from_file(KERNEL)
    assert OP.find(CudaSource.from_text(src.text.replace("threadIdx.x >> 5;", "threadIdx.x >> 4;"))) == []
