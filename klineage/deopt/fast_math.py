"""Fast-math intrinsics (`__expf`, `__logf`, `__fdividef`, `rsqrtf`, `__sinf`, ...): single SFU
instructions with a bounded ulp error instead of the correctly rounded library sequences.

Sites are grouped per function: the skill an expert applies is "use fast-math intrinsics in this
kernel's epilogue/softmax/activation", and one walker step per call would split one decision into
many near-identical steps. `exp2f(x * LOG2E)` (the exp-via-exp2 trick) is recognised when the
constant is a literal 1.4426950... or a log2e constant (LOG2E, kLog2e, M_LOG2E). Single-instruction
inline PTX approximations (`ex2/lg2/sin/cos/tanh/rcp/rsqrt/sqrt.approx[.ftz].f32 %0, %1` with one
"=f" output and one "f" input, the usual `fast_exp2` wrapper) become the C math function.
"""

from __future__ import annotations

import re

import tree_sitter as ts

from klineage.deopt import _cexpr as X
from klineage.deopt.base import Operator, Precondition, Site
from klineage.source import edit
from klineage.source.model import CudaSource
from klineage.source.syntax import unparenthesized

#: fast intrinsic -> precise function with the same arguments
RENAME = {
    "__expf": "expf",
    "__logf": "logf",
    "__log2f": "log2f",
    "__log10f": "log10f",
    "__sinf": "sinf",
    "__cosf": "cosf",
    "__tanf": "tanf",
    "__powf": "powf",
    "__exp10f": "exp10f",
    "__sincosf": "sincosf",
    "__fmaf_rn": "fmaf",
    "__fsqrt_rn": "sqrtf",
}
#: fast intrinsics written back as an operator expression
SPECIAL = frozenset({"__fdividef", "__frcp_rn", "rsqrtf"})
FAST = frozenset(RENAME) | SPECIAL | {"exp2f"}
#: the forward map (precise function -> intrinsic) used by `apply`
FORWARD = {
    "expf": "__expf",
    "logf": "__logf",
    "sinf": "__sinf",
    "cosf": "__cosf",
    "powf": "__powf",
    "log2f": "__log2f",
    "log10f": "__log10f",
    "tanf": "__tanf",
    "fmaf": "__fmaf_rn",
}
_LOG2E = re.compile(r"^(?:1\.44269504\d*f?|M_LOG2E(?:_F|f)?|k?_?[lL][oO][gG]2_?[eE](?:_?[fF])?)$")


def _log2e_factor(src: CudaSource, arg: ts.Node) -> ts.Node | None:
    """For `x * LOG2E` or `LOG2E * x`, the node `x`; else None."""
    a = unparenthesized(arg)
    if a.type != "binary_expression" or src.text_of(a.children[1]) != "*":
        return None
    left, right = a.child_by_field_name("left"), a.child_by_field_name("right")
    if right is not None and _LOG2E.match(src.text_of(right).strip()):
        return left
    if left is not None and _LOG2E.match(src.text_of(left).strip()):
        return right
    return None


#: inline PTX approximate math: `asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x))` -> `y = exp2f(x);`
PTX_APPROX = {
    "ex2": "exp2f({})",
    "lg2": "log2f({})",
    "sin": "sinf({})",
    "cos": "cosf({})",
    "tanh": "tanhf({})",
    "rcp": "1.0f / {}",
    "rsqrt": "1.0f / sqrtf({})",
    "sqrt": "sqrtf({})",
}
_PTX_RE = re.compile(
    r"^\s*(?P<op>ex2|lg2|sin|cos|tanh|rcp|rsqrt|sqrt)\.approx(?:\.ftz)?\.f32\s+%0\s*,\s*%1\s*;?\s*$"
)


def _ptx_approx(src: CudaSource, fn: ts.Node) -> list[tuple[ts.Node, str, str]]:
    """(asm statement, replacement statement, op) for single-instruction PTX approximate math."""
    out = []
    for asm in (n for n in X.walk(fn) if n.type == "gnu_asm_expression"):
        m = _PTX_RE.match(X.asm_template(src, asm))
        ops = X.asm_operands(src, asm)
        stmt = X.asm_statement(asm)
        if m is None or len(ops) != 2 or stmt is asm:
            continue
        if (ops[0].constraint, ops[1].constraint) != ("=f", "f"):
            continue
        y, x = ops[0].expr, ops[1].expr
        out.append((stmt, f"{y} = {PTX_APPROX[m.group('op')].format(X.wrap_text(x))};", m.group("op")))
    return out


def _is_fast(src: CudaSource, call: ts.Node) -> bool:
    name = X.callee_name(call)
    if name == "exp2f":
        args = X.call_args(call)
        return len(args) == 1 and _log2e_factor(src, args[0]) is not None
    return name in FAST


def _precise(src: CudaSource, call: ts.Node) -> str:
    """The precise form of one fast call, with nested fast calls rewritten too."""

    def rw(n: ts.Node) -> str | None:
        return _precise(src, n) if n.type == "call_expression" and _is_fast(src, n) else None

    name = X.callee_name(call)
    args = X.call_args(call)
    texts = [X.render(src, a, rw) for a in args]
    wrapped = [t if a.type in X.PRIMARY else f"({t})" for a, t in zip(args, texts, strict=True)]
    outer = X.needs_outer_parens(call)
    if name in RENAME:
        return f"{RENAME[name]}({', '.join(texts)})"
    if name == "exp2f":
        x = _log2e_factor(src, args[0])
        assert x is not None
        return f"expf({X.render(src, x, rw)})"
    if name == "__fdividef":
        # keep float division when neither operand is known to be float (ints would divide exactly)
        known = any(X.scalar_type(src, a) in ("float", "double") for a in args)
        num = wrapped[0] if known else f"static_cast<float>({texts[0]})"
        out = f"{num} / {wrapped[1]}"
    elif name == "__frcp_rn":
        out = f"1.0f / {wrapped[0]}"
    else:  # rsqrtf
        out = f"1.0f / sqrtf({texts[0]})"
    return f"({out})" if outer else out


def _fast_calls(src: CudaSource, fn: ts.Node) -> list[ts.Node]:
    return [c for c in X.calls_in(fn, lambda n: n in FAST) if _is_fast(src, c)]


def _forward_kind(src: CudaSource, n: ts.Node) -> str | None:
    """Which forward rewrite applies to node `n` (call, rsqrt or fdiv), if any."""
    if n.type == "call_expression" and X.callee_name(n) in FORWARD:
        return "call"
    if n.type == "binary_expression" and src.text_of(n.children[1]) == "/":
        left, right = n.child_by_field_name("left"), n.child_by_field_name("right")
        if left is None or right is None:
            return None
        if (
            re.fullmatch(r"1(?:\.0*)?f", src.text_of(left))
            and right.type == "call_expression"
            and X.callee_name(right) == "sqrtf"
        ):
            return "rsqrt"
        if X.scalar_type(src, left) == "float" and X.scalar_type(src, right) == "float":
            return "fdiv"
    return None


def _forward_sites(src: CudaSource, fn: ts.Node) -> list[ts.Node]:
    """Every precise float form in `fn` the forward step can speed up."""
    return [n for n in X.walk(fn) if _forward_kind(src, n) is not None]


def _fast(src: CudaSource, n: ts.Node) -> str:
    """The intrinsic form of one precise node, nested precise forms rewritten too."""

    def rw(m: ts.Node) -> str | None:
        if (
            m.type == "parenthesized_expression"
            and len(m.named_children) == 1
            and _forward_kind(src, m.named_children[0]) in ("rsqrt", "fdiv")
        ):
            return _fast(src, m.named_children[0])
        return _fast(src, m) if _forward_kind(src, m) is not None else None

    kind = _forward_kind(src, n)
    if kind == "call":
        args = ", ".join(X.render(src, a, rw) for a in X.call_args(n))
        return f"{FORWARD[X.callee_name(n)]}({args})"
    right = n.child_by_field_name("right")
    left = n.child_by_field_name("left")
    assert left is not None and right is not None
    if kind == "rsqrt":
        return f"rsqrtf({X.render(src, X.call_args(right)[0], rw)})"

    def bare(m: ts.Node) -> ts.Node:
        return (
            m.named_children[0] if m.type == "parenthesized_expression" and len(m.named_children) == 1 else m
        )

    return f"__fdividef({X.render(src, bare(left), rw)}, {X.render(src, bare(right), rw)})"


class FastMath(Operator):
    name = "fast_math"
    category = "specialized_instruction"
    intent = (
        "Use fast-math intrinsics (__expf, __logf, __fdividef, rsqrtf, __sinf/__cosf, __powf) for float "
        "math in this function: one SFU instruction each, within the workload's tolerance."
    )
    mechanical_apply = True

    def find(self, src: CudaSource) -> list[Site]:
        sites = []
        for fn in X.code_functions(src):
            calls = _fast_calls(src, fn)
            ptx = _ptx_approx(src, fn)
            if calls or ptx:
                names = sorted({X.callee_name(c) for c in calls} | {f"ptx:{op}.approx" for _, _, op in ptx})
                sites.append(
                    self.site(
                        src,
                        fn,
                        f"{len(calls) + len(ptx)} fast-math op(s) ({', '.join(names)}) in "
                        f"{X.N.func_name(fn)}",
                        function=X.N.func_name(fn),
                        intrinsics=",".join(names),
                        count=str(len(calls) + len(ptx)),
                    )
                )
        return sites

    def _remove(self, src: CudaSource, site: Site) -> CudaSource:
        fn = src.node_at(site.anchor)
        assert fn is not None
        edits = [edit.replace(c, _precise(src, c)) for c in X.outermost(_fast_calls(src, fn))]
        edits += [edit.replace(stmt, text) for stmt, text, _ in _ptx_approx(src, fn)]
        return edit.apply_edits(src, edits)

    def find_forward(self, src: CudaSource) -> list[Site]:
        sites = []
        for fn in X.code_functions(src):
            found = _forward_sites(src, fn)
            if found:
                sites.append(
                    self.site(
                        src,
                        fn,
                        f"{len(found)} precise float op(s) in {X.N.func_name(fn)} could use intrinsics",
                        function=X.N.func_name(fn),
                        count=str(len(found)),
                    )
                )
        return sites

    def preconditions(self, src: CudaSource, site: Site) -> list[Precondition]:
        fn = src.node_at(site.anchor)
        if fn is None:
            return [Precondition("site_present", False, "the function is gone")]
        facts = []
        doubles = []
        for c in _fast_calls(src, fn) + [n for n in _forward_sites(src, fn) if n.type == "call_expression"]:
            for a in X.call_args(c):
                if X.scalar_type(src, a) == "double":
                    doubles.append(f"{src.text_of(c)[:40]} (line {c.start_point.row + 1})")
        facts.append(
            Precondition(
                "float_operands",
                not doubles,
                "every operand is float (the intrinsics are single precision)"
                if not doubles
                else "double operand(s) would be truncated to float: " + "; ".join(doubles),
                "Data types",
            )
        )
        facts.append(
            Precondition(
                "tolerance_absorbs_ulp_error",
                True,
                "the result is compared with a float tolerance (fast intrinsics err by a few ulp; "
                "__fdividef returns 0 for |divisor| > 2^126)",
                "Data types",
            )
        )
        return facts

    def _apply(self, src: CudaSource, site: Site) -> CudaSource:
        fn = src.node_at(site.anchor)
        assert fn is not None
        edits = []
        for n in X.outermost(_forward_sites(src, fn)):
            target = (
                n.parent
                if n.type == "binary_expression"
                and n.parent is not None
                and n.parent.type == "parenthesized_expression"
                else n
            )
            edits.append(edit.replace(target, _fast(src, n)))
        return edit.apply_edits(src, edits)
