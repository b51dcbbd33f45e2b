"""Size-class dispatch in the host code: `if (N <= 1024) warp_per_row<<<...>>>(...) else
block_per_row<<<...>>>(...)`. Experts pick a kernel (or a template instance) per problem-size
class; the simpler program runs one path for every size. Removal keeps one branch of such an
`if`; whether that path is correct for the sizes the other branch served is the gate's question
(its shapes span the size classes), so a rejection here is evidence of what a size class needs.
There is no mechanical forward step: adding a class means writing its specialized kernel."""

from __future__ import annotations

import re

import tree_sitter as ts

from klineage.deopt.base import Operator, Precondition, Refused, Site
from klineage.source import edit
from klineage.source import nodes as N
from klineage.source.constructs import Call, Construct
from klineage.source.model import CudaSource

_SIDE_EFFECT = re.compile(r"(?<![=!<>])=(?!=)|\+\+|--")


def _launching_functions(src: CudaSource, every_call: tuple[Call, ...]) -> set[str]:
    """Host-side functions that launch a kernel, directly or through another one of them."""
    host = [f for f in src.functions if f.kind in ("host", "launcher")]
    launching = {s.function for s in src.launch_sites if s.function}
    calls = {f.name: {c.name for c in every_call if c.function == f.name} for f in host}
    changed = True
    while changed:
        changed = False
        for f in host:
            if f.name not in launching and calls[f.name] & launching:
                launching.add(f.name)
                changed = True
    return launching


def _launches(src: CudaSource, node: ts.Node, every_call: tuple[Call, ...], launching: set[str]) -> bool:
    """A kernel launch, or a call to a launching host function, inside `node` (the source model's
    launch sites and calls, as `_launching_functions` reads them)."""

    def inside(c: Construct) -> bool:
        return node.start_byte <= c.start and c.end <= node.end_byte

    return any(inside(s) for s in src.launch_sites) or any(
        inside(c) and c.name in launching for c in every_call
    )


def _branches(node: ts.Node) -> tuple[ts.Node | None, ts.Node | None]:
    then = node.child_by_field_name("consequence")
    alt = node.child_by_field_name("alternative")
    if alt is not None and alt.type == "else_clause":
        alt = next((c for c in alt.named_children if c.type != "comment"), None)
    return then, alt


def _is_constexpr(node: ts.Node) -> bool:
    return any(c.type == "constexpr" for c in node.children)


class SizeDispatch(Operator):
    name = "size_dispatch"
    category = "tiling"
    intent = (
        "Dispatch each problem-size class from the host to a kernel (or template instance) specialized for it, "
        "e.g. a warp per row for short rows and a block per row for long ones."
    )
    mechanical_apply = False

    def _ifs(self, src: CudaSource) -> list[tuple[ts.Node, ts.Node, ts.Node, str]]:
        """(if node, then, else, function) for host-side ifs with a launch on both sides."""
        every_call = src.calls(r".+")
        launching = _launching_functions(src, every_call)
        out = []
        for f in src.functions:
            if f.kind not in ("host", "launcher"):
                continue
            fn = src.node_for(f)
            for node in N.walk(fn):
                if node.type != "if_statement":
                    continue
                then, alt = _branches(node)
                if then is None or alt is None or _is_constexpr(node):
                    continue
                if _launches(src, then, every_call, launching) and _launches(src, alt, every_call, launching):
                    out.append((node, then, alt, f.name))
        return out

    def find(self, src: CudaSource) -> list[Site]:
        sites = []
        for node, _then, _alt, fn in self._ifs(src):
            cond = " ".join(src.text_of(node.child_by_field_name("condition")).split())
            line = src.line_of(node.start_byte)
            for keep in ("else", "then"):
                sites.append(
                    self.site(
                        src,
                        node,
                        f"keep the {keep} branch of `if {cond}` in {fn} (line {line})",
                        keep=keep,
                        condition=cond,
                        function=fn,
                    )
                )
        return sites

    def _target(self, src: CudaSource, site: Site) -> tuple[ts.Node, ts.Node, ts.Node]:
        for node, then, alt, _fn in self._ifs(src):
            if node.start_byte == site.start and node.end_byte == site.end:
                return node, then, alt
        raise Refused(f"{self.name}: the dispatch at line {site.line} is no longer there")

    def removal_preconditions(self, src: CudaSource, site: Site) -> list[Precondition]:
        cond = site.details.get("condition", "")
        pure = not _SIDE_EFFECT.search(cond)
        return [
            Precondition(
                "condition_without_side_effects",
                pure,
                "the condition only reads values" if pure else f"`{cond}` assigns or increments",
            )
        ]

    def preconditions(self, src: CudaSource, site: Site) -> list[Precondition]:
        cond = site.details.get("condition", "")
        return [
            Precondition(
                "size_class",
                True,
                f"the launcher splits the problem by `{cond}`: each side's kernel is specialized for its sizes",
                kind="Layout",
            )
        ]

    def _remove(self, src: CudaSource, site: Site) -> CudaSource:
        node, then, alt = self._target(src, site)
        kept = then if site.details.get("keep") == "then" else alt
        return edit.apply_edits(src, [edit.replace(node, src.text_of(kept))])
