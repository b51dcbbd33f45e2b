"""`#pragma unroll [N]` on a loop with a compile-time trip count: removes loop overhead and lets
registers replace indexed local arrays."""

from __future__ import annotations

import re
from typing import Any

from klineage.deopt.base import Operator, Precondition, Site
from klineage.source import edit
from klineage.source.model import CudaSource

_FOR = re.compile(r"for\s*\((?P<init>[^;]*);(?P<cond>[^;]*);(?P<step>[^)]*)\)")
_COND = re.compile(r"^\s*\w+\s*(<|<=|>|>=|!=)\s*(?P<bound>.+?)\s*$")
_CONST_EXPR = re.compile(r"^[\w\s()+\-*/%]+$")


def compile_time_bound(header: str, constants: set[str], runtime: frozenset[str] = frozenset()) -> bool:
    """The loop's bound is arithmetic on literals and compile-time names (template parameters,
    ALL_CAPS constants): the compiler can count its trips."""
    m = _FOR.search(header.replace("\n", " "))
    if not m:
        return False
    c = _COND.match(m.group("cond"))
    if not c or not _CONST_EXPR.match(c.group("bound")):
        return False
    names = set(re.findall(r"[A-Za-z_]\w*", c.group("bound")))
    return all(n in constants or (re.fullmatch(r"[A-Z_][A-Z0-9_]*", n) and n not in runtime) for n in names)


def _params(src: CudaSource, function: str | None) -> frozenset[str]:
    fn = src.function(function) if function else None
    return frozenset(p.name for p in fn.params) if fn else frozenset()


def _constants(src: CudaSource, function: str | None) -> set[str]:
    fn = src.function(function) if function else None
    names = {p.name for p in fn.template_params} if fn else set()
    names |= set(re.findall(r"constexpr\s+\w+\s+(\w+)\s*=", src.text))
    return names


class PragmaUnroll(Operator):
    name = "pragma_unroll"
    category = "tuning"
    intent = "Unroll loops with a compile-time trip count (#pragma unroll) to remove loop overhead and keep per-iteration values in registers."
    mechanical_apply = True

    def find(self, src: CudaSource) -> list[Site]:
        """One site per function: its unroll pragmas go in one backward step. They are one tuning
        decision per function (none changes what is computed), and a step per pragma made them
        188 of the 371 steps of a whole-corpus walk, each with its gate and roundtrip."""
        by_fn: dict[str, list[Any]] = {}
        for p in src.pragmas:
            if p.name == "unroll" and p.function is not None:
                by_fn.setdefault(p.function, []).append(p)
        sites = []
        for fn, ps in by_fn.items():
            lines = ", ".join(str(p.line) for p in ps)
            sites.append(
                self.site(
                    src,
                    ps[0],
                    f"{len(ps)} #pragma unroll in {fn} (line {lines})"[:200],
                    function=fn,
                    count=str(len(ps)),
                    lines=lines,
                    factors=",".join(p.value or "" for p in ps),
                )
            )
        return sites

    def _remove(self, src: CudaSource, site: Site) -> CudaSource:
        fn = site.details.get("function")
        pragmas = [p for p in src.pragmas if p.name == "unroll" and p.function == fn]
        if not pragmas:  # a site from an older record: the pragma at its line
            pragmas = [next(p for p in src.pragmas if p.start == site.start or p.line == site.line)]
        return edit.apply_edits(src, [edit.delete(src, p) for p in pragmas])

    def _unrollable(self, src: CudaSource, function: str | None = None) -> dict[str, list[Any]]:
        """Function -> its loops with a compile-time bound and no pragma yet."""
        by_fn: dict[str, list[Any]] = {}
        for loop in src.loops:
            if not loop.header.startswith("for") or loop.function is None or src.pragma_of(loop) is not None:
                continue
            if function is not None and loop.function != function:
                continue
            if compile_time_bound(loop.header, _constants(src, loop.function), _params(src, loop.function)):
                by_fn.setdefault(loop.function, []).append(loop)
        return by_fn

    def find_forward(self, src: CudaSource) -> list[Site]:
        """One site per function, as `find`: the forward step unrolls all its compile-time loops."""
        return [
            self.site(
                src,
                loops[0],
                f"{len(loops)} loop(s) in {fn} with a compile-time bound",
                function=fn,
                lines=", ".join(str(lp.line) for lp in loops),
                header=loops[0].header.strip(),
            )
            for fn, loops in self._unrollable(src).items()
        ]

    def preconditions(self, src: CudaSource, site: Site) -> list[Precondition]:
        fn = site.details.get("function")
        loops = self._unrollable(src, fn).get(fn or "", [])
        ok = bool(loops)
        return [
            Precondition(
                "compile_time_trip_count",
                ok,
                f"{len(loops)} loop bound(s) in {fn} are literals or compile-time constants"
                if ok
                else f"no loop of {fn} without a pragma has a compile-time bound",
            )
        ]

    def _apply(self, src: CudaSource, site: Site) -> CudaSource:
        fn = site.details.get("function")
        loops = self._unrollable(src, fn).get(fn or "", [])
        return edit.apply_edits(
            src, [edit.insert_before(lp, "#pragma unroll\n" + edit.indent_of(src, lp)) for lp in loops]
        )
