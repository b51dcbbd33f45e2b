"""The row layouts' shape rules: what a thread-per-row kernel's rows and blocks measure at the
workload's bench sizes, and which layout and block size those sizes call for.

A row layout that is correct at every size still costs time at the wrong one: a warp on a row of
three elements idles 29 lanes, a block of 64 threads on a row of 131072 elements leaves each
thread a walk of 2048 elements and the GPU with 512 blocks of two warps. The rules, in numbers:

- a warp per row needs rows of at least `MIN_WARP_ROW` elements at some bench size (shorter rows
  keep a thread per row: a warp would idle most of its lanes on every pass);
- a warp per row walks at most `MAX_WARP_ROW` elements a row (256 a lane); longer rows take a block
  per row, whose block-strided loop streams the row (no row is ever held in registers whole);
- a block per row keeps its launch's block while each thread walks at most `MAX_PER_THREAD`
  elements of the longest bench row; past that the block grows to the smallest power of two that
  brings the walk under it, at most `MAX_BLOCK` threads (rows of 4096 keep blocks of 128 or 256;
  a row of 131072 takes 1024: 128 elements a thread, still streamed by the loop).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import tree_sitter as ts

from klineage.deopt import _threads as T
from klineage.deopt.base import LaunchValues
from klineage.source.constructs import Function
from klineage.source.model import CudaSource

MIN_WARP_ROW = 8
MAX_WARP_ROW = 32 * 256
MAX_PER_THREAD = 64
MAX_BLOCK = 1024


@dataclass(frozen=True)
class RowShape:
    """One launch of a thread-per-row kernel at one bench size: its block (None when it cannot be
    evaluated) and the longest extent of its row loops."""

    block: int | None
    length: int


def row_shapes(
    src: CudaSource, fn: ts.Node, info: Function, loops: Sequence[ts.Node], bench: Sequence[LaunchValues]
) -> list[RowShape] | None:
    """Per launch of `info` and bench size, the block and the row length (the `for` loops in
    `loops` read through the launch's arguments); None when some extent cannot be evaluated (a
    size the rule cannot judge is not judged)."""
    bounds = [
        src.text_of(loop.child_by_field_name("condition").child_by_field_name("right")) for loop in loops
    ]
    if not bounds or not bench:
        return None
    consts = T.file_constants(src)
    out = []
    for ls in T.launches_of(src, info.name):
        launcher = src.function(ls.function or "")
        if launcher is None:
            return None
        block = T.eval_int(T.resolve_local(src, src.node_for(launcher), ls.block), consts)
        for values in bench:
            env = T.bench_env(consts, launcher, values)
            texts = [T.kernel_expr_in_launcher(src, info, ls, b, fn) for b in bounds]
            lengths = [T.eval_int(T.strip_casts(t), env) if t is not None else None for t in texts]
            if any(n is None for n in lengths):
                return None
            out.append(RowShape(block, max(n for n in lengths if n is not None)))
    return out or None


def block_for_row(length: int, block: int) -> int:
    """The block a block per row runs for rows of `length`: `block` while a thread walks at most
    MAX_PER_THREAD elements, else the smallest power of two that keeps the walk under it (at most
    MAX_BLOCK)."""
    if length <= block * MAX_PER_THREAD or block >= MAX_BLOCK:
        return block
    grown = 32
    while grown * MAX_PER_THREAD < length and grown < MAX_BLOCK:
        grown *= 2
    return max(grown, block)
