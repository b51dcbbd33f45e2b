"""Does a new value of a block-size constant fit the workload's bench sizes? (tile_size's shape
rule: the CPU judge cannot time a changed value, so a value must at least make sense there.)

Two ways a larger block wastes the GPU, read from each launch whose block uses the constant:

- the grid divides the work by the block (`(M + threads - 1) / threads`): a larger block makes
  fewer blocks; when the new grid falls below both the old one and `MIN_GRID_BLOCKS` (one block
  per SM of an H100 or H200), SMs that had work go idle (softmax_long's 512 rows in blocks of 64:
  8 blocks; of 1024, one);
- the grid does not use the constant (a block per row, a fixed grid): the block's threads stride
  loops over `blockDim.x`; a block larger than every such loop's extent idles the threads past it
  (no block of 1024 threads for a row of 96).

A launch, or a bench size, whose sizes cannot be evaluated is not judged; the value is refused only
when every judged launch at every bench size wastes it.

The other side (`longest_walk`): how many elements of a block-strided loop a thread walks at the
bench sizes. A value step that brings a walk over row_shape's MAX_PER_THREAD down is one the CPU
judge may keep without timing it (tile_size's `shape_effect`).
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from klineage.deopt import _threads as T
from klineage.deopt.base import LaunchValues, Precondition
from klineage.source.constructs import Function, LaunchSite
from klineage.source.model import CudaSource

MIN_GRID_BLOCKS = 132


def _uses(text: str, name: str) -> bool:
    return re.search(rf"(?<![\w.]){re.escape(name)}(?!\w)", text) is not None


def _strided_extents(
    src: CudaSource, info: Function, ls: LaunchSite, env: dict[str, int]
) -> list[int] | None:
    """The extents of the kernel's loops that step by `blockDim.x`, at the launch's arguments."""
    fn = src.node_for(info)
    out = []
    for loop in (n for n in T.walk(fn) if n.type == "for_statement"):
        update = loop.child_by_field_name("update")
        cond = loop.child_by_field_name("condition")
        if update is None or cond is None or not re.search(r"\+=blockDim\.x$", T.squash(src.text_of(update))):
            continue
        right = cond.child_by_field_name("right")
        text = T.kernel_expr_in_launcher(src, info, ls, src.text_of(right), fn) if right is not None else None
        n = T.eval_int(T.strip_casts(text), env) if text is not None else None
        if n is None:
            return None
        out.append(n)
    return out or None


def _waste(
    src: CudaSource, ls: LaunchSite, name: str, old: int, new: int, env: dict[str, int]
) -> str | bool | None:
    """Why `new` wastes this launch at `env` (a string), False when it does not, None: not judged."""
    info = src.kernel(ls.name)
    block = T.eval_int(ls.block, {**env, name: new})
    if info is None or block is None:
        return None
    if _uses(ls.grid, name):
        before, after = T.eval_int(ls.grid, {**env, name: old}), T.eval_int(ls.grid, {**env, name: new})
        if before is None or after is None:
            return None
        if after < min(before, MIN_GRID_BLOCKS):
            return f"{ls.name}'s grid {before} -> {after} blocks"
        return False
    extents = _strided_extents(src, info, ls, env)
    if extents is None:
        return None
    return (
        f"{ls.name}'s block {block} > its block-strided extent {max(extents)}"
        if block > max(extents)
        else False
    )


def block_size_facts(
    src: CudaSource, name: str, old: int, new: int, bench: Sequence[LaunchValues]
) -> list[Precondition]:
    """`block_fits_the_shape` for constant `name` moving `old` -> `new` (empty when no launch's
    block reads it, or nothing could be judged)."""
    consts = T.file_constants(src)
    judged, wasted = 0, []
    for ls in src.launch_sites:
        launcher = src.function(ls.function or "")
        if launcher is None or not _uses(ls.block, name):
            continue
        for values in bench:
            env = T.bench_env(consts, launcher, values)
            why = _waste(src, ls, name, old, new, env)
            if why is None:
                continue
            judged += 1
            if why:
                wasted.append(str(why))
    if not judged:
        return []
    ok = len(wasted) < judged
    return [
        Precondition(
            "block_fits_the_shape",
            ok,
            f"{name} = {new} leaves work for the GPU's SMs and the block's threads at some bench size"
            if ok
            else f"{name} = {new} wastes the GPU at every bench size ({'; '.join(dict.fromkeys(wasted))})",
            "Layout",
        )
    ]


def longest_walk(src: CudaSource, bench: Sequence[LaunchValues]) -> int | None:
    """The most elements of a `+= blockDim.x` loop one thread walks, over every launch and bench
    size (the launch's block read through the launcher's locals); None when none can be judged."""
    consts = T.file_constants(src)
    walks = []
    for ls in src.launch_sites:
        launcher = src.function(ls.function or "")
        info = src.kernel(ls.name)
        if launcher is None or info is None:
            continue
        block_text = T.resolve_local(src, src.node_for(launcher), ls.block)
        for values in bench:
            env = T.bench_env(consts, launcher, values)
            block = T.eval_int(block_text, env)
            extents = _strided_extents(src, info, ls, env)
            if block and block > 0 and extents:
                walks.append(-(-max(extents) // block))
    return max(walks) if walks else None
