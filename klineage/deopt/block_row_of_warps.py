"""A row per block of warps instead of a row per warp (the step between a warp per row and a
block per row; llm.c's layernorm kernel4 -> kernel5).

Backward: a block-per-row kernel becomes a warp-per-row one, as one edit the gate sees:
block_per_row's removal (a thread per row) followed by warp_per_row's forward step on the kernel it
gives. block_per_row alone goes from a block straight to a thread per row, so a walk from a
block-per-row expert never holds the warp-per-row state an author's lineage went through; taken
before it, this step does, and warp_per_row's removal can follow. Its facts are both steps' facts
(the second read on the thread-per-row kernel). No mechanical forward step: the walk records it
with its evidence, it is not offered as a skill (block_per_row's and warp_per_row's forward steps
already cover both directions of the layout).
"""

from __future__ import annotations

import dataclasses

from klineage.deopt.base import Operator, Precondition, Refused, Site
from klineage.deopt.block_per_row import BlockPerRow
from klineage.deopt.rows import fact
from klineage.deopt.warp_per_row import WarpPerRow
from klineage.source.model import CudaSource

_BLOCK, _WARP = BlockPerRow(), WarpPerRow()


class BlockRowOfWarps(Operator):
    name = "block_row_of_warps"
    category = "tiling"
    intent = (
        "Give each row a block of warps instead of one warp (each warp reduces its lanes, the warps "
        "combine through shared memory): more threads and loads in flight on a long row."
    )

    def find(self, src: CudaSource) -> list[Site]:
        return [
            dataclasses.replace(s, operator=self.name, summary=f"{s.summary} (-> one warp per row)")
            for s in _BLOCK.find(src)
        ]

    def _steps(
        self, src: CudaSource, site: Site
    ) -> tuple[list[Precondition], CudaSource | None, Site | None]:
        """(the facts, the thread-per-row kernel, warp_per_row's forward site on it)."""
        rows = dataclasses.replace(site, operator=_BLOCK.name)
        facts = _BLOCK.removal_preconditions(src, rows)
        if not all(f.holds for f in facts):
            return facts, None, None
        mid = _BLOCK.remove(src, rows)
        kernel = site.details.get("kernel")
        fwd = next((s for s in _WARP.find_forward(mid) if s.anchor.function == kernel), None)
        if fwd is None:
            why = f"warp_per_row finds no thread-per-row site in {kernel} once it is a thread per row"
            return [*facts, fact("warp_per_row_forward", False, why, "Layout")], mid, None
        return [*facts, *_WARP.preconditions(mid, fwd)], mid, fwd

    def removal_preconditions(self, src: CudaSource, site: Site) -> list[Precondition]:
        return self._steps(src, site)[0]

    def _remove(self, src: CudaSource, site: Site) -> CudaSource:
        _, mid, fwd = self._steps(src, site)
        if mid is None or fwd is None:
            raise Refused(f"{self.name}: the preconditions changed under the edit")
        return _WARP.apply(mid, fwd)
