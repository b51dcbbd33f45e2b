"""`#pragma unroll [N]` on a loop with a compile-time trip count: removes loop overhead and lets
registers replace indexed local arrays."""

from __future__ import annotations

import re

from klineage.deopt.base import Operator, Precondition, Site
from klineage.source import edit
from klineage.source.constructs import Loop
from klineage.source.model import CudaSource

_CONST_BOUND = re.compile(r"for\s*\(.*;\s*\w+\s*(<|<=|>|>=|!=)\s*(\d+|[A-Z_][A-Z0-9_]*|\w+\s*/\s*\d+)\s*;")


class PragmaUnroll(Operator):
    name = "pragma_unroll"
    category = "tuning"
    intent = "Unroll loops with a compile-time trip count (#pragma unroll) to remove loop overhead and keep per-iteration values in registers."
    mechanical_apply = True

    def find(self, src: CudaSource) -> list[Site]:
        return [
            self.site(src, p, f"#pragma {p.name}{' ' + p.value if p.value else ''} at line {p.line}",
                      factor=p.value or "", loop_line=str(p.loop.line if p.loop else 0))
            for p in src.pragmas
            if p.name == "unroll" and p.function is not None
        ]

    def _remove(self, src: CudaSource, site: Site) -> CudaSource:
        pragma = next(p for p in src.pragmas if p.start == site.start or p.line == site.line)
        return edit.apply_edits(src, [edit.delete(src, pragma)])

    def find_forward(self, src: CudaSource) -> list[Site]:
        sites = []
        for loop in src.loops:
            if loop.kind != "for" or loop.function is None or src.pragma_of(loop) is not None:
                continue
            if _CONST_BOUND.search(loop.header.replace("\n", " ")):
                sites.append(self.site(src, loop, f"loop at line {loop.line} has a compile-time bound", header=loop.header.strip()))
        return sites

    def preconditions(self, src: CudaSource, site: Site) -> list[Precondition]:
        header = site.details.get("header", "")
        ok = bool(_CONST_BOUND.search(header.replace("\n", " ")))
        return [Precondition("compile_time_trip_count", ok,
                             "loop bound is a literal or compile-time constant" if ok else f"bound of '{header}' is not a compile-time constant")]

    def _apply(self, src: CudaSource, site: Site) -> CudaSource:
        loop = next(lp for lp in src.loops if lp.start == site.start)
        return edit.apply_edits(src, [edit.insert_before(loop, "#pragma unroll\n" + edit.indent_of(src, loop))])


def loop_of(src: CudaSource, site: Site) -> Loop | None:
    return next((lp for lp in src.loops if lp.start == site.start), None)
