"""Contiguous active threads in an interleaved shared-memory reduction tree.

Round `s` (1, 2, 4, ...) of an interleaved tree adds `a[k + s]` into `a[k]` for every k that is a
multiple of 2s. Written `if (t % (2 * s) == 0) a[t] += a[t + s];`, the working threads are
scattered: one in 2s, so every warp diverges in every round and most lanes idle. Written with a
strided index, `i = 2 * s * t; if (i < B) a[i] += a[i + s];`, the same additions are done by the
first B/(2s) threads: whole warps drop out instead of lanes. Same pairs, same order of each sum:
the results are bit-identical. (The next step, sequential addressing, is tree_addressing's.)

Backward: the strided-index loop becomes the modulo one. Forward: the modulo loop becomes the
strided-index one. The tree reader is tree_addressing's.
"""

from __future__ import annotations

from klineage.deopt.tree_addressing import TreeRewrite


class TreeCompaction(TreeRewrite):
    name = "tree_compaction"
    category = "smem_layout"
    intent = (
        "Index an interleaved shared-memory reduction tree by i = 2*s*t (the first B/2s threads work) instead "
        "of testing t % (2*s) == 0 (one thread in 2s works): whole warps retire each round, no lane divergence."
    )
    optimized, simpler, forward_from = "strided", "interleaved", ("interleaved",)
