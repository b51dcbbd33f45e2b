"""Packed half2 / bf16x2 arithmetic: one instruction (`__hfma2`, `__hmul2`, ...) works on two 16-bit
lanes, and the pair conversions (`__half22float2`, `__float22half2_rn`, `__floats2bfloat162_rn`,
`__bfloat1622float2`) move two lanes at once.

Backward, per function: every packed expression is rewritten lane by lane into scalar half/bf16
intrinsics on `.x` and `.y` (`__hfma2(a, b, c)` -> `make_half2(__hfma(a.x, b.x, c.x), __hfma(a.y,
b.y, c.y))`); nested packed calls stay scalar throughout, and the pair is rebuilt only where a packed
value is needed. Scalar half arithmetic rounds exactly as the packed form, so the function is
unchanged. An operand that is neither a plain name/element nor a packed call would be evaluated
twice; such a call refuses.
"""

from __future__ import annotations

import re

import tree_sitter as ts

from klineage.deopt import _cexpr as X
from klineage.deopt.base import Operator, Precondition, Refused, Site
from klineage.source import edit
from klineage.source.model import CudaSource
from klineage.source.syntax import unparenthesized

#: packed op -> scalar op on one lane
ARITH = {
    "__hadd2": "__hadd",
    "__hsub2": "__hsub",
    "__hmul2": "__hmul",
    "__hfma2": "__hfma",
    "__h2div": "__hdiv",
    "__hneg2": "__hneg",
    "__habs2": "__habs",
    "__hmax2": "__hmax",
    "__hmin2": "__hmin",
    "__hadd2_sat": "__hadd_sat",
    "__hsub2_sat": "__hsub_sat",
    "__hmul2_sat": "__hmul_sat",
    "__hfma2_sat": "__hfma_sat",
    "__hfma2_relu": "__hfma_relu",
    "__hmax2_nan": "__hmax_nan",
    "__hmin2_nan": "__hmin_nan",
}
#: float2 -> packed, (float, float) -> packed: (per-lane conversion, packed type)
TO_PACKED = {
    "__float22half2_rn": ("__float2half_rn", "half2", 1),
    "__floats2half2_rn": ("__float2half_rn", "half2", 2),
    "__float22bfloat162_rn": ("__float2bfloat16_rn", "bf162", 1),
    "__floats2bfloat162_rn": ("__float2bfloat16_rn", "bf162", 2),
    "__half2half2": ("", "half2", 0),
    "__bfloat162bfloat162": ("", "bf162", 0),
}
#: packed -> float2 (per-lane conversion)
TO_FLOAT2 = {"__half22float2": ("__half2float", "half2"), "__bfloat1622float2": ("__bfloat162float", "bf162")}
PACKED = frozenset(ARITH) | frozenset(TO_PACKED) | frozenset(TO_FLOAT2)
_MAKE = {"half2": "make_half2", "bf162": "make_bfloat162"}
_TYPE_WORDS = {"__half2": "half2", "half2": "half2", "__nv_bfloat162": "bf162", "nv_bfloat162": "bf162"}


def _aliases(src: CudaSource) -> dict[str, str]:
    out = {}
    for m in re.finditer(r"\busing\s+(\w+)\s*=\s*([\w:]+)\s*;", src.text):
        out[m.group(1)] = m.group(2)
    for m in re.finditer(r"\btypedef\s+([\w:]+)\s+(\w+)\s*;", src.text):
        out[m.group(2)] = m.group(1)
    return out


def _packed_type(src: CudaSource, node: ts.Node) -> str | None:
    """'half2' or 'bf162' for an expression of packed type we can tell; None if unknown."""
    n = unparenthesized(node)
    if n.type == "call_expression":
        name = X.callee_name(n)
        if name in TO_PACKED:
            return TO_PACKED[name][1]
        if name in ARITH:
            return next((t for a in X.call_args(n) if (t := _packed_type(src, a)) is not None), None)
        return None
    base = n
    while base.type in ("subscript_expression", "field_expression", "pointer_expression"):
        nxt = base.child_by_field_name("argument")
        if nxt is None:
            break
        base = nxt
    if base.type != "identifier":
        return None
    d = X.declared_type(src, n, src.text_of(base))
    if d is None:
        return None
    aliases = _aliases(src)
    for w in re.findall(r"[\w:]+", d[0]):
        w = aliases.get(w, w)
        if w in _TYPE_WORDS:
            return _TYPE_WORDS[w]
    return None


def _simple(node: ts.Node) -> bool:
    """Safe and cheap to evaluate twice: names, elements, fields, literals, no calls or writes."""
    return not X.has_side_effects(node) and not any(n.type == "call_expression" for n in X.walk(node))


class _Lanes:
    """Rewrites packed expressions into per-lane scalar expressions."""

    def __init__(self, src: CudaSource) -> None:
        self.src = src
        self.refused: list[str] = []

    def lanes(self, node: ts.Node) -> tuple[str, str, str | None]:
        """(x lane, y lane, packed type) of a packed-valued expression."""
        src = self.src
        n = unparenthesized(node)
        if n.type == "call_expression" and X.callee_name(n) in ARITH:
            op = ARITH[X.callee_name(n)]
            parts = [self.lanes(a) for a in X.call_args(n)]
            t = next((p[2] for p in parts if p[2] is not None), None)
            return (f"{op}({', '.join(p[0] for p in parts)})", f"{op}({', '.join(p[1] for p in parts)})", t)
        if n.type == "call_expression" and X.callee_name(n) in TO_PACKED:
            conv, t, arity = TO_PACKED[X.callee_name(n)]
            args = X.call_args(n)
            texts = [self.scalar(a) for a in args]
            if arity == 0:
                if not _simple(args[0]):
                    self.refused.append(
                        f"`{src.text_of(args[0])}` would be evaluated twice (line {n.start_point.row + 1})"
                    )
                return texts[0], texts[0], t
            if arity == 1:
                f = X.wrap_text(texts[0])
                if not _simple(args[0]):
                    self.refused.append(
                        f"`{src.text_of(args[0])}` would be evaluated twice (line {n.start_point.row + 1})"
                    )
                return f"{conv}({f}.x)", f"{conv}({f}.y)", t
            return f"{conv}({texts[0]})", f"{conv}({texts[1]})", t
        if not _simple(n):
            self.refused.append(
                f"packed operand `{src.text_of(n)[:50]}` would be evaluated twice (line {n.start_point.row + 1})"
            )
        text = X.render(src, n, self._rw)
        w = text if n.type in X.PRIMARY else f"({text})"
        return f"{w}.x", f"{w}.y", _packed_type(src, n)

    def scalar(self, node: ts.Node) -> str:
        """Text of a non-packed expression with packed calls inside it rewritten."""
        return X.render(self.src, node, self._rw)

    def _rw(self, n: ts.Node) -> str | None:
        return self.packed(n) if n.type == "call_expression" and X.callee_name(n) in PACKED else None

    def packed(self, call: ts.Node) -> str:
        """Replacement text for one packed call, as a value of its own type."""
        name = X.callee_name(call)
        if name in TO_FLOAT2:
            conv, _ = TO_FLOAT2[name]
            lx, ly, _ = self.lanes(X.call_args(call)[0])
            return f"make_float2({conv}({lx}), {conv}({ly}))"
        lx, ly, t = self.lanes(call)
        if t is None:
            self.refused.append(
                f"cannot tell half2 from bf16x2 for `{self.src.text_of(call)[:50]}` "
                f"(line {call.start_point.row + 1})"
            )
            t = "half2"
        return f"{_MAKE[t]}({lx}, {ly})"


def _packed_calls(fn: ts.Node) -> list[ts.Node]:
    return X.calls_in(fn, PACKED)


def _rewrite(src: CudaSource, fn: ts.Node) -> tuple[list[edit.Edit], list[str]]:
    lanes = _Lanes(src)
    edits = [edit.replace(c, lanes.packed(c)) for c in X.outermost(_packed_calls(fn))]
    return edits, lanes.refused


class PackedHalf2(Operator):
    name = "packed_half2"
    category = "vectorization"
    intent = (
        "Do 16-bit float math two lanes at a time with packed half2/bf16x2 intrinsics (__hfma2, __hmul2, "
        "pair conversions) instead of one scalar half op per element."
    )

    def find(self, src: CudaSource) -> list[Site]:
        sites = []
        for fn in X.code_functions(src):
            calls = _packed_calls(fn)
            if calls:
                names = sorted({X.callee_name(c) for c in calls})
                sites.append(
                    self.site(
                        src,
                        fn,
                        f"{len(calls)} packed 16-bit op(s) ({', '.join(names)}) in {X.N.func_name(fn)}",
                        function=X.N.func_name(fn),
                        ops=",".join(names),
                        count=str(len(calls)),
                    )
                )
        return sites

    def removal_preconditions(self, src: CudaSource, site: Site) -> list[Precondition]:
        fn = src.node_at(site.anchor)
        if fn is None:
            return [Precondition("site_present", False, "the function is gone")]
        _, refused = _rewrite(src, fn)
        return [
            Precondition(
                "lanes_rewritable",
                not refused,
                "every packed operand is a plain value or a packed call"
                if not refused
                else "; ".join(refused),
                "Data types",
            )
        ]

    def preconditions(self, src: CudaSource, site: Site) -> list[Precondition]:
        fn = src.node_at(site.anchor)
        types = set()
        if fn is not None:
            for c in _packed_calls(fn):
                for a in X.call_args(c):
                    if (t := _packed_type(src, a)) is not None:
                        types.add(t)
        return [
            Precondition(
                "packed_16bit_data",
                True,
                f"operands are {' and '.join(sorted(types)) or 'half2/bf16x2'} pairs of adjacent elements",
                "Data types",
            ),
            Precondition(
                "even_pairing",
                True,
                "elements are processed in pairs (even count or a scalar tail)",
                "Layout",
            ),
            Precondition(
                "native_16bit_math", True, "sm_53+ for half2, sm_80+ for bf16x2 arithmetic", "Hardware"
            ),
        ]

    def _remove(self, src: CudaSource, site: Site) -> CudaSource:
        fn = src.node_at(site.anchor)
        if fn is None:
            raise Refused(f"{self.name}: the function is gone")
        edits, _ = _rewrite(src, fn)
        return edit.apply_edits(src, edits)
