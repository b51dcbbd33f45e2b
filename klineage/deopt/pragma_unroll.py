"""`#pragma unroll [N]` on a loop with a compile-time trip count: removes loop overhead and lets
registers replace indexed local arrays."""

from __future__ import annotations

import re

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
            if not loop.header.startswith("for") or loop.function is None or src.pragma_of(loop) is not None:
                continue
            if compile_time_bound(loop.header, _constants(src, loop.function), _params(src, loop.function)):
                sites.append(self.site(src, loop, f"loop at line {loop.line} has a compile-time bound",
                                       header=loop.header.strip(), function=loop.function))
        return sites

    def preconditions(self, src: CudaSource, site: Site) -> list[Precondition]:
        header = site.details.get("header", "")
        fn = site.details.get("function")
        ok = compile_time_bound(header, _constants(src, fn), _params(src, fn))
        return [Precondition("compile_time_trip_count", ok,
                             "loop bound is a literal or compile-time constant" if ok else f"bound of '{header}' is not a compile-time constant")]

    def _apply(self, src: CudaSource, site: Site) -> CudaSource:
        loop = next(lp for lp in src.loops if lp.start == site.start)
        return edit.apply_edits(src, [edit.insert_before(loop, "#pragma unroll\n" + edit.indent_of(src, loop))])

