"""two_level_reduce: a block reduced in two levels (per warp, then one slot per warp) <-> one
shared-memory tree over every thread of the block."""

from __future__ import annotations

from pathlib import Path

import pytest
from deopt_parallel_checks import assert_passes

from klineage.deopt.base import Refused
from klineage.deopt.block_per_row import BlockPerRow
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


#: llm.c softmax kernel4's idiom, in a kernel of ours: thread 0 folds the warps' slots serially
FOLD = DATA / "two_level_reduce" / "thread0_fold_softmax.cu"
SOFTMAX = Path(__file__).resolve().parents[1] / "expert_kernels" / "softmax"


def test_thread_zero_fold_becomes_one_tree_per_reduction(tmp_path: Path) -> None:
    """A warp max and a warp sum, each parked in per-warp slots and folded by thread 0: each becomes
    its own block-wide tree (the fold's combiner), read back by every thread; block_per_row then
    takes the kernel to a thread per row (llm.c softmax kernel4 -> kernel2 -> kernel1)."""
    src = CudaSource.from_file(FOLD)
    assert [s.summary for s in OP.find(src)] == [
        "two-level block max of hi (warp_max per warp, thread 0 folds) in row_softmax",
        "two-level block sum of total (warp_sum per warp, thread 0 folds) in row_softmax",
    ]
    while sites := OP.find(src):
        assert all(p.holds for p in OP.removal_preconditions(src, sites[0]))
        src = OP.remove(src, sites[0])
    text = src.text
    assert "kl_tree[threadIdx.x] = fmaxf(kl_tree[threadIdx.x], kl_tree[threadIdx.x + kl_s]);" in text
    assert "kl_tree1[threadIdx.x] += kl_tree1[threadIdx.x + kl_s];" in text
    assert "hi = kl_tree[0];\n    const float top = hi;" in text and "if (threadIdx.x == 0)" not in text
    assert_passes(text, SOFTMAX, tmp_path, "trees.cu")
    rows = BlockPerRow()
    (row,) = rows.find(src)
    assert all(p.holds for p in rows.removal_preconditions(src, row))
    assert_passes(rows.remove(src, row).text, SOFTMAX, tmp_path, "thread_per_row.cu")


@pytest.mark.parametrize(
    ("edit", "fact"),
    [
        (("m = fmaxf(m, parts[w]);", "m = fminf(m, parts[w]);"), "fold_matches_warp_reduction"),
        (("for (int w = 1; w < nwarps; ++w)", "for (int w = 1; w < 4; ++w)"), "fold_covers_the_warps"),
        (("total += expf(xr[j] - top);", "total += expf(xr[j] - hi);"), "warp_value_unread"),
        (("row_softmax<<<M, 256, 0, s>>>", "row_softmax<<<M, 96, 0, s>>>"), "power_of_two_block"),
    ],
)
def test_thread_zero_fold_refusals(edit: tuple[str, str], fact: str) -> None:
    src = CudaSource.from_file(FOLD)
    assert edit[0] in src.text
    changed = CudaSource.from_text(src.text.replace(*edit))
    site = OP.find(changed)[0]
    assert {p.name for p in OP.removal_preconditions(changed, site) if not p.holds} == {fact}
    with pytest.raises(Refused, match=fact):
        OP.remove(changed, site)


def test_thread_zero_fold_needs_its_shape() -> None:
    """No site when thread 0 does more than fold (a store of its own) or the broadcast is no
    declaration of slot 0."""
    text = FOLD.read_text()
    extra = text.replace("        parts[0] = m;\n", "        parts[0] = m;\n        y[0] = m;\n")
    assert len(OP.find(CudaSource.from_text(text))) == 2
    assert len(OP.find(CudaSource.from_text(extra))) == 1
    assert (
        len(
            OP.find(
                CudaSource.from_text(
                    text.replace("const float top = parts[0];", "const float top = parts[1];")
                )
            )
        )
        == 1
    )
