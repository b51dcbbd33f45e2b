"""Thread coarsening: each thread handles a compile-time factor F of items
(`#pragma unroll for (int k = 0; k < F; ++k) { idx = base + k * blockDim.x; ... }`, with the block
offset scaled by F: `base = blockIdx.x * (blockDim.x * F) + threadIdx.x`).

Coarsening amortizes per-thread setup (index math, parameter loads, address computation) over F
items and puts F independent memory operations in flight per thread; the grid shrinks by F.
Removing it gives one item per thread: the F factor leaves every block offset, the loop body runs
once with k = 0, and every launch of the kernel multiplies its grid by F (the same index range is
covered, block for block).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace

import tree_sitter as ts

from klineage.deopt import _threads as T
from klineage.deopt.base import Operator, Precondition, Refused, Site
from klineage.source import edit
from klineage.source.constructs import Function
from klineage.source.model import CudaSource

#: factor the forward step uses when none is given
DEFAULT_FACTOR = 4
_SYNC = r"__syncthreads\w*|__syncwarp|__shfl\w*|__ballot_sync|\w*::sync"


@dataclass(frozen=True)
class _Coarse:
    loop: ts.Node
    var: str
    factor: str  # the bound's text (a literal, constant or template parameter)
    scaled: tuple[tuple[ts.Node, str], ...]  # (product node, its text without the factor)
    unscaled: tuple[ts.Node, ...]  # blockIdx.x uses not scaled by the factor


def _counting_loop(src: CudaSource, node: ts.Node) -> tuple[str, str] | None:
    """(var, bound text) of `for (int k = 0; k < BOUND; ++k)`."""
    parts = T.counting_loop(src, node)
    if parts is None:
        return None
    var, init, cond, _, _ = parts
    if T.squash(src.text_of(init)) != "0" or cond.child_by_field_name("operator").type != "<":
        return None
    return var, T.squash(src.text_of(cond.child_by_field_name("right")))


def _is_factor(text: str, factor: str) -> bool:
    return T.squash(text) == factor


def _leaves(node: ts.Node) -> list[ts.Node]:
    """Operands of a `*` chain, looking through parentheses around `*` chains."""
    if node.type == "parenthesized_expression" and node.named_children and _is_mul(node.named_children[0]):
        return _leaves(node.named_children[0])
    if _is_mul(node):
        return _leaves(node.child_by_field_name("left")) + _leaves(node.child_by_field_name("right"))
    return [node]


def _is_mul(node: ts.Node) -> bool:
    return node.type == "binary_expression" and node.child_by_field_name("operator").type == "*"


def _mul_top(node: ts.Node) -> ts.Node:
    top = node
    while top.parent is not None and (
        _is_mul(top.parent)
        or (
            top.parent.type == "parenthesized_expression"
            and _is_mul(top)
            and top.parent.parent is not None
            and _is_mul(top.parent.parent)
        )
    ):
        top = top.parent
    return top


def _scaled_product(src: CudaSource, bid: ts.Node, factor: str) -> tuple[ts.Node, str] | None:
    """The product above `blockIdx.x` that has `factor` as an operand, and its text without it."""
    p: ts.Node | None = bid
    while p is not None and p.type in (
        "field_expression",
        "binary_expression",
        "parenthesized_expression",
        "cast_expression",
        "call_expression",
        "argument_list",
        "template_function",
        "identifier",
    ):
        if _is_mul(p):
            top = _mul_top(p)
            leaves = _leaves(top)
            hits = [lf for lf in leaves if _is_factor(src.text_of(lf), factor)]
            if hits:
                rest = [src.text_of(lf) for lf in leaves if lf is not hits[0]]
                return top, " * ".join(rest)
            p = top
        if p.type == "binary_expression" and p.child_by_field_name("operator").type not in ("+", "-", "*"):
            return None
        p = p.parent
    return None


def _coarse(src: CudaSource, fn: ts.Node, loop: ts.Node) -> _Coarse | None:
    parts = _counting_loop(src, loop)
    if parts is None:
        return None
    var, factor = parts
    body = loop.child_by_field_name("body")
    if body is None or not T.uses_ident(body, var):
        return None
    scaled, unscaled = [], []
    for n in T.walk(fn):
        if n.type == "field_expression" and T.squash(src.text_of(n)) == "blockIdx.x":
            hit = _scaled_product(src, n, factor)
            if hit is None:
                unscaled.append(n)
            elif all(hit[0] != s[0] for s in scaled):
                scaled.append(hit)
    if not scaled:
        return None
    outer = set(T.local_decls(fn)) - set(T.local_decls(loop))
    if T.assigned_in(body) & outer:
        return None  # items feed an accumulator: a reduction loop (e.g. a GEMM k-loop), not coarsening
    return _Coarse(loop, var, factor, tuple(scaled), tuple(unscaled))


def _simplify_zero(text: str) -> str:
    """Drop `+ 0 * x`, `0 * x +` and `+ 0` terms left by substituting k = 0."""
    t = re.sub(r"\s*\+\s*\(?0\)?\s*\*\s*[\w.]+", "", text)
    t = re.sub(r"\(?0\)?\s*\*\s*[\w.]+\s*\+\s*", "", t)
    t = re.sub(r"\s*\+\s*\(?0\)?(?![\w.*])", "", t)
    return t


_KINDS = {
    "all_block_offsets_scaled": "Layout",
    "independent_items": "Pipeline",
    "factor_only_coarsens": "Layout",
    "no_jump_out": "Pipeline",
    "launch_in_file": "Layout",
    "factor_known_at_launch": "Layout",
    "grid_1d": "Layout",
    "compile_time_factor": "Layout",
    "no_barrier": "Pipeline",
    "no_early_return": "Pipeline",
    "index_only_through_var": "Layout",
}


def _kinded(facts: list[Precondition]) -> list[Precondition]:
    """Give each fact its skill-card kind (Layout, Pipeline, ...)."""
    return [f if f.kind else replace(f, kind=_KINDS.get(f.name, "")) for f in facts]


class Coarsening(Operator):
    name = "coarsening"
    category = "tiling"
    intent = (
        "Coarsen threads: each thread handles a compile-time factor of items (unrolled loop, block "
        "offset scaled by the factor), amortizing index math and keeping several loads in flight; "
        "the grid shrinks by the factor."
    )
    mechanical_apply = True

    def find(self, src: CudaSource) -> list[Site]:
        sites = []
        for k in src.kernels:
            fn = src.node_for(k)
            for n in T.walk(fn):
                if n.type != "for_statement":
                    continue
                c = _coarse(src, fn, n)
                if c is not None:
                    sites.append(
                        self.site(
                            src,
                            n,
                            f"{c.factor} items per thread ({c.var}) in {k.name}",
                            kernel=k.name,
                            var=c.var,
                            factor=c.factor,
                        )
                    )
        return sites

    def _parts(self, src: CudaSource, site: Site) -> tuple[_Coarse, Function, ts.Node]:
        kernel = next((k for k in src.kernels if k.name == site.details.get("kernel")), None)
        node = src.node_at(site.anchor)
        if kernel is None or node is None:
            raise Refused(f"{self.name}: site {site.anchor} not found")
        fn = src.node_for(kernel)
        c = _coarse(src, fn, node)
        if c is None:
            raise Refused(f"{self.name}: the loop at line {site.line} no longer coarsens")
        return c, kernel, fn

    def _factor_in_launch(self, src: CudaSource, kernel: Function, factor: str, ls) -> str | None:
        tmap = T.template_map(src, kernel, ls)
        if factor in tmap:
            return tmap[factor]
        if re.fullmatch(r"\d+", factor) or factor in T.file_constants(src):
            return factor
        return None

    def removal_preconditions(self, src: CudaSource, site: Site) -> list[Precondition]:
        return _kinded(self._removal_facts(src, site))

    def _removal_facts(self, src: CudaSource, site: Site) -> list[Precondition]:
        c, kernel, fn = self._parts(src, site)
        facts = []
        facts.append(
            Precondition(
                "all_block_offsets_scaled",
                not c.unscaled,
                f"blockIdx.x at line {c.unscaled[0].start_point.row + 1} is not scaled by {c.factor}"
                if c.unscaled
                else f"every block offset is scaled by {c.factor}",
            )
        )
        body = c.loop.child_by_field_name("body")
        outer = set(T.local_decls(fn)) - set(T.local_decls(c.loop))
        carried = sorted(T.assigned_in(body) & outer)
        facts.append(
            Precondition(
                "independent_items",
                not carried,
                f"the loop carries {', '.join(carried)} from item to item (a reduction, not coarsening)"
                if carried
                else "items are independent: the body writes no variable declared outside it",
            )
        )
        other = [
            n
            for n in T.walk(fn)
            if n.type in ("identifier", "number_literal")
            and T.squash(src.text_of(n)) == c.factor
            and not _inside(n, c.loop.child_by_field_name("condition"))
            and not any(_inside(n, s[0]) for s in c.scaled)
        ]
        if not re.fullmatch(r"\d+", c.factor):
            facts.append(
                Precondition(
                    "factor_only_coarsens",
                    not other,
                    f"{c.factor} is also used at line {other[0].start_point.row + 1} (register arrays or "
                    "other loops depend on it)"
                    if other
                    else f"{c.factor} only counts items and scales offsets",
                )
            )
        jumps = T.jumps_out(c.loop)
        facts.append(
            Precondition(
                "no_jump_out",
                not jumps,
                "the body leaves the loop early" if jumps else "no break/continue/return in the body",
            )
        )
        launches = T.launches_of(src, kernel.name)
        if not launches:
            facts.append(Precondition("launch_in_file", False, f"no launch of {kernel.name} in this file"))
        for ls in launches:
            f = self._factor_in_launch(src, kernel, c.factor, ls)
            facts.append(
                Precondition(
                    "factor_known_at_launch",
                    f is not None,
                    f"launch at line {ls.line}: grid x {f}"
                    if f is not None
                    else f"launch at line {ls.line}: factor {c.factor} not known in the launcher",
                )
            )
            if T.grid_is_dim3(src, ls):
                facts.append(Precondition("grid_1d", False, f"launch at line {ls.line}: grid is a dim3"))
        return facts

    def preconditions(self, src: CudaSource, site: Site) -> list[Precondition]:
        return _kinded(self._skill_facts(src, site))

    def _skill_facts(self, src: CudaSource, site: Site) -> list[Precondition]:
        if site.details.get("forward") == "1":
            return self._forward_facts(src, site)
        factor = site.details.get("factor", "")
        return [
            Precondition(
                "compile_time_factor", True, f"items per thread {factor} is a compile-time constant"
            ),
            *self._removal_facts(src, site),
        ]

    def _remove(self, src: CudaSource, site: Site) -> CudaSource:
        c, kernel, fn = self._parts(src, site)
        edits = [edit.replace(node, text) for node, text in c.scaled if not _inside(node, c.loop)]
        body = c.loop.child_by_field_name("body")
        inner = [(n, t) for n, t in c.scaled if _inside(n, c.loop)]
        body_text = _render_body(src, body, c.var, inner)
        pragma = src.pragma_of(c.loop)
        start = c.loop.start_byte
        if pragma is not None:
            start = src.line_start(pragma.line)
            body_text = edit.indent_of(src, c.loop) + body_text
        edits.append(edit.Edit(start, c.loop.end_byte, body_text))
        for ls in T.launches_of(src, kernel.name):
            f = self._factor_in_launch(src, kernel, c.factor, ls)
            grid = T.config_nodes(src, ls)[0]
            edits.append(edit.replace(grid, f"{T.paren(src.text_of(grid))} * {T.paren(f or c.factor)}"))
        return edit.apply_edits(src, edits)

    # ---- forward -----------------------------------------------------------------------------
    def find_forward(self, src: CudaSource) -> list[Site]:
        sites = []
        for k in src.kernels:
            fn = src.node_for(k)
            if self.find(src) and any(s.details.get("kernel") == k.name for s in self.find(src)):
                continue
            for decl in _tid_decls(src, fn):
                var = T.decl_name(decl) or ""
                sites.append(
                    self.site(
                        src,
                        decl,
                        f"{k.name}: one item per thread ({var}) could take {DEFAULT_FACTOR}",
                        kernel=k.name,
                        var=var,
                        factor=str(DEFAULT_FACTOR),
                        forward="1",
                    )
                )
        return sites

    def _forward_parts(self, src: CudaSource, site: Site) -> tuple[ts.Node, list[ts.Node], Function, ts.Node]:
        kernel = next((k for k in src.kernels if k.name == site.details.get("kernel")), None)
        decl = src.node_at(site.anchor)
        if kernel is None or decl is None:
            raise Refused(f"{self.name}: site {site.anchor} not found")
        sibs = [s for s in decl.parent.named_children if s.type != "comment"]
        rest = sibs[sibs.index(decl) + 1 :]
        return decl, rest, kernel, src.node_for(kernel)

    def _forward_facts(self, src: CudaSource, site: Site) -> list[Precondition]:
        decl, rest, kernel, fn = self._forward_parts(src, site)
        facts = []
        factor = int(site.details.get("factor", DEFAULT_FACTOR))
        facts.append(
            Precondition("compile_time_factor", factor > 1, f"factor {factor} fixed at compile time")
        )
        syncs = [c for s in rest for c in T.calls_named(s, _SYNC)]
        facts.append(
            Precondition(
                "no_barrier",
                not syncs,
                "the per-item code synchronizes"
                if syncs
                else "no barrier or warp collective in the per-item code",
            )
        )
        rets = [n for s in rest for n in T.walk(s) if n.type == "return_statement"]
        facts.append(
            Precondition(
                "no_early_return",
                not rets,
                "the per-item code returns early (write it as `if (i < n) {...}`)"
                if rets
                else "no early return",
            )
        )
        raw = [s for s in rest if re.search(r"\b(blockIdx|threadIdx|gridDim)\b", src.text_of(s))]
        before = [
            n
            for n in T.walk(fn)
            if n.type == "field_expression"
            and T.squash(src.text_of(n)) == "blockIdx.x"
            and not _inside(n, decl)
        ]
        facts.append(
            Precondition(
                "index_only_through_var",
                not raw and not before,
                "other code reads blockIdx.x/threadIdx directly"
                if raw or before
                else "the thread's item is known only through its index",
            )
        )
        outer = {
            T.decl_name(d)
            for d in T.walk(fn)
            if d.type in ("declaration", "parameter_declaration") and not any(_inside(d, s) for s in rest)
        }
        carried = sorted({nm for s in rest for nm in T.assigned_in(s)} & {o for o in outer if o})
        facts.append(
            Precondition(
                "independent_items",
                not carried,
                f"the per-item code writes {', '.join(carried)}" if carried else "items are independent",
            )
        )
        launches = T.launches_of(src, kernel.name)
        facts.append(
            Precondition(
                "launch_in_file", bool(launches), "launch found" if launches else "no launch to shrink"
            )
        )
        return facts

    def _apply(self, src: CudaSource, site: Site) -> CudaSource:
        decl, rest, kernel, fn = self._forward_parts(src, site)
        f = site.details.get("factor", str(DEFAULT_FACTOR))
        var = T.decl_name(decl) or "i"
        ds = decl.child_by_field_name("declarator")
        value = src.text_of(ds.child_by_field_name("value"))
        block = T.global_tid(value) or "blockDim.x"
        ty = src.text_of(decl.child_by_field_name("type"))
        ind = edit.indent_of(src, decl)
        base = f"{var}_base"
        scaled = value.replace(block, f"({block} * {f})", 1) if block in value else value
        body = "\n".join(ind + "    " + src.text_of(s).replace("\n", "\n    ") for s in rest)
        text = (
            f"const int {base} = {scaled};\n{ind}#pragma unroll\n{ind}for (int k = 0; k < {f}; ++k) {{\n"
            f"{ind}    {'const ' if 'const' not in ty else ''}{ty} {var} = {base} + k * {block};\n{body}\n{ind}}}"
        )
        edits = [edit.Edit(decl.start_byte, rest[-1].end_byte if rest else decl.end_byte, text)]
        for ls in T.launches_of(src, kernel.name):
            grid = T.config_nodes(src, ls)[0]
            g = T.paren(src.text_of(grid))
            edits.append(edit.replace(grid, f"({g} + {f} - 1) / {f}"))
        return edit.apply_edits(src, edits)


def _inside(n: ts.Node | None, outer: ts.Node | None) -> bool:
    return (
        n is not None
        and outer is not None
        and outer.start_byte <= n.start_byte
        and n.end_byte <= outer.end_byte
    )


def _render_body(src: CudaSource, body: ts.Node, var: str, scaled: list[tuple[ts.Node, str]]) -> str:
    """The loop body with the item index fixed at 0 and the factor dropped from block offsets."""
    subs = {n.start_byte: (n, t) for n, t in scaled}
    parts, pos = [], body.start_byte
    for start in sorted(subs):
        n, t = subs[start]
        parts.append(src.text_bytes[pos : n.start_byte].decode())
        parts.append(t)
        pos = n.end_byte
    parts.append(src.text_bytes[pos : body.end_byte].decode())
    text = T.subst_idents("".join(parts), {var: "0"})
    return _simplify_zero(text)


def _tid_decls(src: CudaSource, fn: ts.Node) -> list[ts.Node]:
    out = []
    for d in T.walk(fn):
        if d.type != "declaration" or d.parent is None or d.parent.type != "compound_statement":
            continue
        ds = d.children_by_field_name("declarator")
        if len(ds) == 1 and ds[0].type == "init_declarator":
            v = ds[0].child_by_field_name("value")
            if v is not None and T.global_tid(src.text_of(v)) is not None:
                out.append(d)
    return out
