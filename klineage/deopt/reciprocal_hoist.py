"""Reciprocal hoisting: compute `1/s` (or `rsqrtf(var + eps)`) once and multiply every use by it,
replacing a division (a multi-instruction sequence) per element with one multiply.

Backward: `float inv = 1.0f / s; ... y = x * inv;` becomes `y = x / s;` at every multiplicative use
(the declaration goes when nothing else reads it). Forward: a loop that divides by a loop-invariant
float gets `const float inv_s = 1.0f / s;` before it and multiplies instead.
"""

from __future__ import annotations

import re

import tree_sitter as ts

from klineage.deopt import _cexpr as X
from klineage.deopt.base import Operator, Precondition, Refused, Site
from klineage.source import edit
from klineage.source.model import CudaSource
from klineage.source.syntax import unparenthesized

_ONE = re.compile(r"^1(?:\.0*)?[fF]?$|^1\.$")


def _reciprocal_of(src: CudaSource, value: ts.Node) -> tuple[str, str] | None:
    """For `1.0f / E`, `__frcp_rn(E)`, `rsqrtf(E)`, `1.0f / sqrtf(E)`: (divisor text, form); else None."""
    v = unparenthesized(value)
    if v.type == "binary_expression" and src.text_of(v.children[1]) == "/":
        left, right = v.child_by_field_name("left"), v.child_by_field_name("right")
        if left is not None and right is not None and _ONE.match(src.text_of(left).strip()):
            if X.scalar_type(src, right) not in ("float", "double"):  # keep `x / n` a float division
                return f"static_cast<float>({src.text_of(right)})", "division"
            return X.wrap(src, right), "division"
    if v.type == "call_expression":
        name, args = X.callee_name(v), X.call_args(v)
        if name == "__frcp_rn" and len(args) == 1:
            if X.scalar_type(src, args[0]) not in ("float", "double"):
                return f"static_cast<float>({src.text_of(args[0])})", "__frcp_rn"
            return X.wrap(src, args[0]), "__frcp_rn"
        if name == "rsqrtf" and len(args) == 1:
            return f"sqrtf({src.text_of(args[0])})", "rsqrtf"
    return None


def _uses(fn: ts.Node, name: str, after: int) -> list[ts.Node]:
    return [
        n for n in X.walk(fn) if n.type == "identifier" and n.text == name.encode() and n.start_byte >= after
    ]


def _mul_use(src: CudaSource, ident: ts.Node) -> tuple[ts.Node, ts.Node | None, str] | None:
    """(expression to replace, the other factor, kind) when `ident` is a factor of `*` or `*=`."""
    p = ident.parent
    if p is None:
        return None
    if p.type == "binary_expression" and src.text_of(p.children[1]) == "*":
        other = (
            p.child_by_field_name("left")
            if p.child_by_field_name("right") == ident
            else p.child_by_field_name("right")
        )
        return p, other, "mul"
    if (
        p.type == "assignment_expression"
        and src.text_of(p.children[1]) == "*="
        and p.child_by_field_name("right") == ident
    ):
        return p, p.child_by_field_name("left"), "mul_assign"
    return None


class _Decl:
    """One hoisted reciprocal: `T name = <reciprocal of divisor>;`."""

    def __init__(
        self,
        src: CudaSource,
        decl: ts.Node,
        init: ts.Node,
        name: str,
        divisor: str,
        form: str,
        divisor_node: ts.Node,
    ) -> None:
        self.decl, self.init, self.name, self.divisor, self.form = decl, init, name, divisor, form
        self.divisor_node = divisor_node


def _hoisted(src: CudaSource, fn: ts.Node) -> list[_Decl]:
    out = []
    for decl in (n for n in X.walk(fn) if n.type == "declaration"):
        t = decl.child_by_field_name("type")
        if t is None or src.text_of(t) not in ("float", "half", "__half"):
            continue
        for d in decl.children_by_field_name("declarator"):
            if d.type != "init_declarator":
                continue
            target, value = d.child_by_field_name("declarator"), d.child_by_field_name("value")
            if target is None or target.type != "identifier" or value is None:
                continue
            rec = _reciprocal_of(src, value)
            if rec is None:
                continue
            name = src.text_of(target)
            if any(_mul_use(src, u) for u in _uses(fn, name, decl.end_byte)):
                out.append(_Decl(src, decl, d, name, rec[0], rec[1], value))
    return out


def _div_text(src: CudaSource, node: ts.Node, other: ts.Node, divisor: str, kind: str) -> str:
    if kind == "mul_assign":
        return f"{src.text_of(other)} /= {divisor}"
    keep = other.type in X.PRIMARY or (
        other.type == "binary_expression"
        and src.text_of(other.children[1]) in "*/"
        and other == node.child_by_field_name("left")
    )
    out = f"{src.text_of(other) if keep else '(' + src.text_of(other) + ')'} / {divisor}"
    return f"({out})" if _division_needs_parens(src, node) else out


def _division_needs_parens(src: CudaSource, node: ts.Node) -> bool:
    """`a * b` -> `a / s` keeps its precedence level: parens only as the right operand of * / %,
    or under a unary, cast or postfix operator."""
    p = node.parent
    if p is None or not X.needs_outer_parens(node):
        return False
    if p.type == "binary_expression":
        return src.text_of(p.children[1]) in ("*", "/", "%") and p.child_by_field_name("right") == node
    return p.type not in ("conditional_expression", "comma_expression", "assignment_expression")


class ReciprocalHoist(Operator):
    name = "reciprocal_hoist"
    category = "specialized_instruction"
    intent = (
        "Compute a loop-invariant reciprocal once (1.0f / s, or rsqrtf(var + eps)) and multiply by it "
        "instead of dividing at every use."
    )
    mechanical_apply = True

    def find(self, src: CudaSource) -> list[Site]:
        sites = []
        for fn in X.code_functions(src):
            for h in _hoisted(src, fn):
                sites.append(
                    self.site(
                        src,
                        h.decl,
                        f"reciprocal {h.name} = 1/{h.divisor} ({h.form}) multiplied at its uses",
                        name=h.name,
                        divisor=h.divisor,
                        form=h.form,
                    )
                )
        return sites

    def _decl_at(self, src: CudaSource, site: Site) -> tuple[ts.Node, _Decl]:
        node = src.node_at(site.anchor)
        fn = X.enclosing_function(node) if node is not None else None
        h = (
            next((h for h in _hoisted(src, fn) if h.decl == node and h.name == site.details["name"]), None)
            if fn
            else None
        )
        if node is None or fn is None or h is None:
            raise Refused(f"{self.name}: the reciprocal {site.details.get('name')} is gone")
        return fn, h

    def removal_preconditions(self, src: CudaSource, site: Site) -> list[Precondition]:
        fn, h = self._decl_at(src, site)
        later = [n for n in X.walk(fn) if n.start_byte >= h.decl.end_byte]
        written = set()
        for n in later:
            if n.type in ("assignment_expression", "update_expression"):
                written |= X.assigned_names(n)
        changed = sorted(X.identifiers(h.divisor_node) & written)
        facts = [
            Precondition(
                "divisor_unchanged",
                not changed,
                f"{h.divisor} is not modified after the reciprocal is taken"
                if not changed
                else f"{', '.join(changed)} change(s) after the reciprocal: a division at the use would see the new value",
                "Data types",
            )
        ]
        facts.append(
            Precondition(
                "reciprocal_not_reassigned",
                h.name not in written,
                f"{h.name} is assigned once" if h.name not in written else f"{h.name} is reassigned later",
            )
        )
        return facts

    def _remove(self, src: CudaSource, site: Site) -> CudaSource:
        fn, h = self._decl_at(src, site)
        uses = _uses(fn, h.name, h.decl.end_byte)
        muls = [(u, m) for u in uses if (m := _mul_use(src, u)) is not None]
        edits = [edit.replace(m[0], _div_text(src, m[0], m[1], h.divisor, m[2])) for _, m in muls]
        # a use nested in another use's expression (x * inv * inv) is left for a second pass
        spans = X.outermost([m[0] for _, m in muls])
        edits = [e for e, (_, m) in zip(edits, muls, strict=True) if m[0] in spans]
        if len(edits) == len(uses):
            edits.append(
                edit.delete(src, h.decl)
                if len(h.decl.children_by_field_name("declarator")) == 1
                else edit.replace(h.init, h.init.text.decode())
            )
        return edit.apply_edits(src, edits)

    # ---- forward ----------------------------------------------------------------------------
    def _loop_divisions(self, src: CudaSource) -> list[tuple[ts.Node, str, list[ts.Node]]]:
        """(loop, divisor text, division nodes) for float divisions by a loop-invariant divisor."""
        out = []
        for loop in src.loops:
            if loop.function is None or loop.depth != 0:
                continue
            lnode = src.node_for(loop)
            written = X.assigned_names(lnode)
            declared = set(X.declarations_in(lnode))
            init = lnode.child_by_field_name("initializer")
            if init is not None:
                declared |= X.identifiers(init)
            groups: dict[str, list[ts.Node]] = {}
            for n in X.walk(lnode):
                if n.type != "binary_expression" or src.text_of(n.children[1]) != "/":
                    continue
                left, right = n.child_by_field_name("left"), n.child_by_field_name("right")
                if left is None or right is None or _ONE.match(src.text_of(left).strip()):
                    continue
                if X.has_side_effects(right) or X.identifiers(right) & (written | declared):
                    continue
                if any(c.type == "call_expression" for c in X.walk(right)):
                    continue
                if X.scalar_type(src, right) != "float" or X.scalar_type(src, left) not in ("float", None):
                    continue
                groups.setdefault(X.text(src, right).strip(), []).append(n)
            out += [(lnode, d, ns) for d, ns in groups.items()]
        return out

    def find_forward(self, src: CudaSource) -> list[Site]:
        return [
            self.site(
                src,
                lnode,
                f"loop at line {lnode.start_point.row + 1} divides by invariant {d} {len(ns)} time(s)",
                divisor=d,
                count=str(len(ns)),
            )
            for lnode, d, ns in self._loop_divisions(src)
        ]

    def preconditions(self, src: CudaSource, site: Site) -> list[Precondition]:
        d = site.details.get("divisor", "")
        if "name" in site.details:  # a found (backward) site
            facts = [
                Precondition(
                    "float_reciprocal",
                    True,
                    f"{site.details['name']} is a float reciprocal of {d}",
                    "Data types",
                )
            ]
        else:
            node = src.node_at(site.anchor)
            found = [g for g in self._loop_divisions(src) if g[0] == node and g[1] == d]
            facts = [
                Precondition(
                    "loop_invariant_divisor",
                    bool(found),
                    f"{d} is float and not written inside the loop"
                    if found
                    else f"{d} is not a float loop invariant of this loop",
                    "Data types",
                )
            ]
        facts.append(
            Precondition(
                "tolerance_absorbs_rounding",
                True,
                "x * (1/s) differs from x / s by at most 1-2 ulp; the float tolerance absorbs it",
                "Data types",
            )
        )
        return facts

    def _apply(self, src: CudaSource, site: Site) -> CudaSource:
        node = src.node_at(site.anchor)
        d = site.details["divisor"]
        found = next((g for g in self._loop_divisions(src) if g[0] == node and g[1] == d), None)
        if found is None or node is None:
            raise Refused(f"{self.name}: no division by {d} in this loop")
        fn = X.enclosing_function(node)
        taken = X.identifiers(fn) if fn is not None else set()
        base = "inv_" + (re.sub(r"\W+", "_", d).strip("_") or "d")
        name, k = base, 1
        while name in taken:
            name, k = f"{base}{k}", k + 1
        indent = edit.indent_of(src, node)
        edits = [edit.insert_before(node, f"const float {name} = 1.0f / {X.wrap_text(d)};\n{indent}")]
        for n in X.outermost(found[2]):
            left = n.child_by_field_name("left")
            assert left is not None
            edits.append(edit.replace(n, f"{src.text_of(left)} * {name}"))
        return edit.apply_edits(src, edits)
