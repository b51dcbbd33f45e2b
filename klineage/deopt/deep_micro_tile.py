"""Deep register micro-tile: a thread's TM x TN accumulator tile grows from at most 4 x 4 to 8 x 8
(64 accumulators), the block tile growing with it and the thread count kept.

Why a step of its own: with TM = TN = 4 a thread issues 8 shared-memory loads per 16 FMAs, and an
SM's shared-memory port (32 words a clock) then caps the FMA pipes (128 lanes) at half their rate;
at 8 x 8 it is 16 loads per 64 FMAs, the ratio the pipes need. register_blocking takes a kernel
from one output per thread to a micro-tile; this takes the micro-tile to the depth the hardware
wants. Same reading and the same edits as register_blocking (named sizes, block tile written
`BM / TM`, grid from the block tile): forward doubles every micro-tile size below 8, backward
halves an 8 x 8 (or deeper) tile.

An expert's micro-tile is rarely written in named sizes (warp tiles, MMA fragments, a size
derived in a template struct): there the backward step re-derives the kernel from what it
computes, at the 4 x 4 micro-tile register_blocking's forward step makes (gemm_tiling reads the
tiled kernel back to its naive loop, tiles it and blocks it again), so the lineage continues
with register_blocking's and gemm_tiling's removals and each of the three steps is mined.
Refused when the accumulator holds at most 16 elements a thread (nothing deeper than 4 x 4), and
when the accumulators are WMMA fragments (tensor_core's removal reads those back).
"""

from __future__ import annotations

from klineage.deopt import _threads as T
from klineage.deopt.base import Precondition, Refused, Site
from klineage.deopt.gemm_loop import block_threads
from klineage.deopt.gemm_tiling import GemmTiling
from klineage.deopt.register_blocking import RegisterBlocking, accumulators
from klineage.source.model import CudaSource

#: the micro-tile size each dimension reaches (64 accumulators: what 255 registers hold with room)
DEEP = 8
#: accumulators a thread holds in the micro-tile a re-derived kernel gets (4 x 4)
REDERIVED = 16
#: registers of an SM's file a block may take (64K on sm_80..sm_90), at about two per accumulator
REGISTER_FILE = 65536


class DeepMicroTile(RegisterBlocking):
    name = "deep_micro_tile"
    category = "tiling"
    intent = (
        "Deepen the register micro-tile to 8 x 8 (64 accumulators per thread, block tile scaled with it, "
        "threads kept): each value loaded from shared memory feeds 8 FMAs, enough to keep the FMA pipes "
        "ahead of the shared-memory port."
    )
    mechanical_apply = True

    def find(self, src: CudaSource) -> list[Site]:
        sites = super().find(src)
        named = {s.details.get("kernel") for s in sites} | self._named(src)
        for s in GemmTiling().find(src):
            kernel = s.details.get("kernel", "")
            if kernel not in named:
                summary = f"register micro-tile of the tiled GEMM {kernel} (re-derived at 4 x 4)"
                detail = (("kernel", kernel), ("rederive", "1"))
                sites.append(Site(self.name, s.anchor, s.start, s.end, summary, detail))
        return sites

    def _named(self, src: CudaSource) -> set[str]:
        """Kernels whose micro-tile is written in named compile-time sizes (read, not re-derived)."""
        return {
            k.name
            for k in src.kernels
            for acc in accumulators(src, src.node_for(k))
            if all(self._value(src, k, d) is not None for d in acc.dims)
        }

    def removal_preconditions(self, src: CudaSource, site: Site) -> list[Precondition]:
        if not site.details.get("rederive"):
            return super().removal_preconditions(src, site)
        facts, t = GemmTiling().untile_plan(src, site, any_depth=True)
        if t is not None:
            deep = t.per_thread is None or t.per_thread > REDERIVED
            facts.append(
                Precondition(
                    "deeper_than_4x4",
                    deep,
                    f"each thread accumulates {t.per_thread or 'a compile-time number of'} outputs"
                    + (f" (more than {REDERIVED})" if deep else f", not more than {REDERIVED}"),
                    "Layout",
                )
            )
            facts.append(
                Precondition(
                    "scalar_accumulators",
                    not t.fragments,
                    "the micro-tile is scalar accumulators in registers"
                    if not t.fragments
                    else "the accumulators are WMMA fragments: tensor_core takes the tile product back "
                    "to the naive loop (re-deriving it on FMAs would drop the tensor cores unmined)",
                    "Data types",
                )
            )
        return facts

    def _remove(self, src: CudaSource, site: Site) -> CudaSource:
        if not site.details.get("rederive"):
            return super()._remove(src, site)
        naive = GemmTiling().untile(src, site, any_depth=True)
        kernel = site.details["kernel"]
        tiling = GemmTiling()
        tiled = tiling.apply(naive, _only(tiling.find_forward(naive), kernel))
        blocking = RegisterBlocking()
        return blocking.apply(tiled, _only(blocking.find_forward(tiled), kernel))

    def _selects(self, vals: list[int | None], forward: bool) -> bool:
        if any(v is None for v in vals):
            return False
        if forward:
            return all(2 <= v < DEEP for v in vals)  # type: ignore[operator]
        return all(v >= DEEP for v in vals)  # type: ignore[operator]

    def _target(self, old: int, forward: bool, factor: int) -> int:
        return old * 2 if forward else old // 2

    def preconditions(self, src: CudaSource, site: Site) -> list[Precondition]:
        facts = super().preconditions(src, site)
        if site.details.get("factor"):
            facts.append(self._register_budget(src, site))
        return facts

    def _register_budget(self, src: CudaSource, site: Site) -> Precondition:
        """Threads per block x (two registers per accumulator after the step) within one SM's file."""
        d = site.details
        kernel = next((k for k in src.kernels if k.name == d.get("kernel")), None)
        threads = block_threads(src, T.launches_of(src, kernel.name)) if kernel else None
        tm, tn = (self._value(src, kernel, d[n]) if kernel else None for n in ("tm", "tn"))
        if threads is None or tm is None or tn is None:
            return Precondition(
                "register_budget", False, "the block's thread count is not a constant", "Hardware"
            )
        need = threads * 2 * (tm * 2) * (tn * 2)
        ok = need <= REGISTER_FILE
        return Precondition(
            "register_budget",
            ok,
            f"{threads} threads x {tm * 2 * tn * 2} accumulators x 2 registers = {need} "
            + ("fits" if ok else "exceeds")
            + f" {REGISTER_FILE}",
            "Hardware",
        )


def _only(sites: list[Site], kernel: str) -> Site:
    mine = [s for s in sites if s.details.get("kernel") == kernel]
    if len(mine) != 1:
        raise Refused(f"deep_micro_tile: {len(mine)} forward sites in {kernel} after un-tiling")
    return mine[0]
