"""GEMM-shaped loops, read on structure: what the GEMM operators need to know about a naive
`C[row, col] = epilogue(sum_k A(row, k) * B(k, col))` kernel, whoever wrote it.

A kernel qualifies when its body is: declarations (two thread-index locals `row` and `col`, each
`blockIdx.d * blockDim.d + threadIdx.d` for a different d, plus launch-uniform locals), a bound
guard `if (row >= EM || col >= EN) return;` (the canonical form of `if (row < M && col < N)`),
an accumulator `T acc = <uniform init>`, one counting loop `for (k = 0; k < EK; ++k)` whose only
statement is `acc += X * Y` (or `acc = acc + X * Y`, `acc = fmaf(X, Y, acc)`), and an epilogue
that reads `acc`, `row` and `col` only. The names, index spellings (`A[row * K + k]`, a
function-like accessor macro `A(row, k)`, a transposed operand `A[k * lda + row]`, casts to
size_t) and which thread index walks rows are free: each factor's index is checked to be affine in
(its output index, k) by evaluating it, and the roles come from which output index a factor reads
(A reads row, B reads col), with the stride of k in each telling how to load its tile coalesced.
"""

from __future__ import annotations

import math
import random
import re
from dataclasses import dataclass

import tree_sitter as ts

from klineage.deopt import _threads as T
from klineage.source.constructs import Function, LaunchSite
from klineage.source.model import CudaSource
from klineage.source.syntax import (
    eval_int,
    file_constants,
    named,
    paren,
    squash,
    subst_idents,
    unparenthesized,
)

#: conversion calls and the type they return (a factor `conv(P[i])` is staged converted)
_CONVERSIONS = {"__bfloat162float": "float", "__half2float": "float", "float": "float", "double": "double"}
#: read-only-path loads that return the element they point at (`__ldg(&P[i])` is `P[i]`)
_LOADS = {"__ldg", "__ldca", "__ldcg", "__ldcs", "__ldlu", "__ldcv"}
_TYPE_WORDS = {"size_t", "int", "long", "unsigned", "const", "float", "double", "static_cast", "int64_t"}
_THREAD = ("threadIdx", "blockIdx", "blockDim", "gridDim")


@dataclass(frozen=True)
class Operand:
    """One factor of the product: its text as written, the pointer it loads, and its index's
    stride along the reduction index k (1: k is contiguous, load tiles along k)."""

    text: str
    pointer: str
    k_contiguous: bool


@dataclass(frozen=True)
class Local:
    name: str
    type: str  # declared type text (`int`, `const int`, `size_t`)


@dataclass(frozen=True)
class GemmLoop:
    """A naive GEMM kernel's parts, as texts the rewrite re-assembles."""

    kernel: str
    row: Local
    col: Local
    k: Local
    k_cond: str  # the loop condition as written (`k < K`)
    k_extent: str  # its bound (`K`)
    acc: Local
    acc_init: str
    combine: str  # "add" (acc += X * Y) or "fma" (acc = fmaf(X, Y, acc))
    a: Operand  # the factor that reads row
    b: Operand  # the factor that reads col
    row_clauses: tuple[str, ...]  # guard clauses on row (`row >= M`)
    col_clauses: tuple[str, ...]
    m_extent: str  # kernel-side extents the guard bounds (`M`, `N`)
    n_extent: str
    guard: str  # the whole guard condition
    uniform: tuple[str, ...]  # launch-uniform declarations to keep, as written
    epilogue: tuple[str, ...]  # statements after the loop, as written
    body_start: int  # the kernel body's byte range (the `{ ... }`)
    body_end: int
    #: locals the guard or epilogue read besides row and col, re-derived from them (`i = row * E + col`)
    derived: tuple[str, ...] = ()


class NotGemm(Exception):
    """The kernel is not GEMM-shaped; the message says which structural fact failed."""


def gemm_loops(src: CudaSource) -> list[tuple[Function, GemmLoop | str]]:
    """Every kernel with a product-accumulating loop: its GemmLoop, or why it does not qualify."""
    out: list[tuple[Function, GemmLoop | str]] = []
    for k in src.kernels:
        fn = src.node_for(k)
        if not _has_product_loop(src, fn):
            continue
        try:
            out.append((k, analyze(src, k)))
        except NotGemm as e:
            out.append((k, str(e)))
    return out


def _has_product_loop(src: CudaSource, fn: ts.Node) -> bool:
    return any(
        n.type == "for_statement"
        and re.search(r"\+=[^;]*\*|=[^;=]*\+[^;]*\*|fmaf?\(", squash(src.text_of(n)))
        for n in T.walk(fn)
    )


def _decl(src: CudaSource, d: ts.Node) -> tuple[Local, str] | None:
    """(name and type, init text) of a one-variable declaration with an initializer."""
    ds = d.children_by_field_name("declarator")
    if d.type != "declaration" or len(ds) != 1 or ds[0].type != "init_declarator":
        return None
    name = ds[0].child_by_field_name("declarator")
    value = ds[0].child_by_field_name("value")
    if name is None or name.type != "identifier" or value is None:
        return None
    type_text = src.text_of((d.start_byte, name.start_byte)).strip()
    if value.type == "initializer_list":  # `T x{v}`
        if value.named_child_count != 1:
            return None
        value = value.named_children[0]
    return Local(src.text_of(name), type_text), src.text_of(value)


def _names(text: str) -> set[str]:
    return set(re.findall(r"(?<![\w.])(?<!->)([A-Za-z_]\w*)(?!\w)", text))


def _macros(src: CudaSource) -> dict[str, tuple[list[str], str]]:
    """Function-like macros of the file: name -> (parameters, body)."""
    out = {}
    for n in src.nodes_of_type("preproc_function_def"):
        name, params, value = (n.child_by_field_name(f) for f in ("name", "parameters", "value"))
        if name is not None and params is not None and value is not None:
            ps = [src.text_of(p) for p in params.named_children]
            out[src.text_of(name)] = (ps, src.text_of(value).strip())
    return out


def _accessor_lambda(init: str) -> tuple[list[str], str] | None:
    """(parameters, returned expression) of an accessor lambda `[&](int i, int j) { return E; }`."""
    m = re.fullmatch(
        r"\s*\[[^\]]*\]\s*\(([^)]*)\)\s*(?:->\s*[\w\s:<>*&]+)?\{\s*return\s+([^;{}]+);\s*\}\s*", init
    )
    if m is None:
        return None
    params = [re.findall(r"\w+", p)[-1] for p in m.group(1).split(",") if re.findall(r"\w+", p)]
    return params, m.group(2).strip()


def expand_macros(text: str, macros: dict[str, tuple[list[str], str]]) -> str:
    """`text` with calls of function-like macros (or accessor lambdas) expanded, arguments
    parenthesized."""
    for _ in range(4):
        changed = False
        for name, (params, body) in macros.items():
            m = re.search(rf"(?<![\w.]){re.escape(name)}\s*\(", text)
            if m is None:
                continue
            depth, i, args, start = 1, m.end(), [], m.end()
            while i < len(text) and depth:
                c = text[i]
                if c in "([":
                    depth += 1
                elif c in ")]":
                    depth -= 1
                elif c == "," and depth == 1:
                    args.append(text[start:i])
                    start = i + 1
                i += 1
            args.append(text[start : i - 1])
            if depth or len(args) != len(params):
                continue
            expanded = subst_idents(body, {p: paren(a) for p, a in zip(params, args, strict=True)})
            text = text[: m.start()] + "(" + expanded + ")" + text[i:]
            changed = True
        if not changed:
            break
    return text


def _subscripts(text: str) -> list[tuple[str, str]]:
    """(pointer, index text) of every `P[index]` in an expression's text (brackets balanced)."""
    out = []
    for m in re.finditer(r"([A-Za-z_]\w*)\s*\[", text):
        depth, i = 1, m.end()
        while i < len(text) and depth:
            depth += {"[": 1, "]": -1}.get(text[i], 0)
            i += 1
        out.append((m.group(1), text[m.end() : i - 1]))
    return out


def _thread_free(text: str) -> bool:
    return not any(re.search(rf"\b{t}\b", text) for t in _THREAD)


def _env_value(text: str, env: dict[str, int]) -> int | None:
    t = T.strip_casts(text)
    t = re.sub(r"\((?:size_t|int64_t|longlong|unsignedlong|long|unsigned)\)", "", t)
    for a in ("threadIdx", "blockIdx", "blockDim"):
        t = re.sub(rf"\b{a}\.([xyz])\b", rf"{a}_\1", t)
    return eval_int(t, env)


def _affine(index: str, out_var: str, k: str, others: set[str], consts: dict[str, int]) -> int | None:
    """1 when `index` steps by one along `k`, 0 for another stride, None when `index` is not affine
    in (out_var, k) with no cross term (checked at random points, other names random sizes)."""
    rng = random.Random(0)
    strides = set()
    for _ in range(4):
        env = {**consts, **{n: rng.randint(40, 90) for n in others}}
        r, kk = rng.randint(0, 30), rng.randint(0, 30)

        def f(rv: int, kv: int, env: dict[str, int] = env) -> int | None:
            return _env_value(index, {**env, out_var: rv, k: kv})

        vals = [f(r, kk), f(r + 1, kk), f(r, kk + 1), f(r + 1, kk + 1), f(r + 2, kk), f(r, kk + 2)]
        if any(v is None for v in vals):
            return None
        v0, vr, vk, vrk, vr2, vk2 = vals  # type: ignore[misc]
        if vrk - vr - vk + v0 != 0 or vr2 - vr != vr - v0 or vk2 - vk != vk - v0:
            return None
        strides.add(vk - v0)
    return 1 if strides == {1} else 0


def _thread_axis(init: str, consts: dict[str, int]) -> str | None:
    """The axis d when `init` is `blockIdx.d * blockDim.d + threadIdx.d` (any spelling)."""
    for d in "xyz":
        env = dict(consts)
        ok = True
        for b, dim, t in ((3, 16, 5), (0, 32, 7), (11, 8, 2)):
            env.update({f"blockIdx_{e}": 100 + b for e in "xyz"})
            env.update({f"threadIdx_{e}": 50 + t for e in "xyz"})
            env.update({f"blockDim_{e}": 64 for e in "xyz"})
            env.update({f"blockIdx_{d}": b, f"blockDim_{d}": dim, f"threadIdx_{d}": t})
            if _env_value(init, env) != b * dim + t:
                ok = False
                break
        if ok:
            return d
    return None


def _linear_split(
    thread_locals: dict[str, tuple[Local, str, ts.Node]], row: str, col: str, consts: dict[str, int]
) -> tuple[str, str] | None:
    """(i, E) when `row` is `i / E` and `col` is `i % E` for a global thread index `i` on one axis."""
    r, c = (T.strip_casts(thread_locals[n][1]) for n in (row, col))
    mr = re.fullmatch(r"\(?(\w+)\)?/(.+)", r)
    mc = re.fullmatch(r"\(?(\w+)\)?%(.+)", c)
    if not mr or not mc or mr.group(1) != mc.group(1) or mr.group(2) != mc.group(2):
        return None
    name, width = mr.group(1), mr.group(2)
    if (
        name not in thread_locals
        or _thread_axis(thread_locals[name][1], consts) is None
        or not _thread_free(width)
    ):
        return None
    return name, width


def _rows_of(extent: str | None, width: str) -> str | None:
    """M when `extent` is `M * E` or `E * M` (a bound on the linear index)."""
    if extent is None:
        return None
    parts = [p for p in re.split(r"\*", squash(extent)) if p]
    if len(parts) == 2 and squash(width).strip("()") in (parts[0].strip("()"), parts[1].strip("()")):
        return parts[1] if parts[0].strip("()") == squash(width).strip("()") else parts[0]
    return None


def _split_or(cond: str) -> list[str]:
    """Top-level `||` clauses of a condition (outer parentheses dropped)."""
    s = cond.strip()
    while s.startswith("(") and s.endswith(")") and _balanced(s[1:-1]):
        s = s[1:-1].strip()
    parts, depth, start = [], 0, 0
    for i, c in enumerate(s):
        depth += {"(": 1, ")": -1}.get(c, 0)
        if depth == 0 and s.startswith("||", i):
            parts.append(s[start:i].strip())
            start = i + 2
    parts.append(s[start:].strip())
    return parts


def _balanced(s: str) -> bool:
    depth = 0
    for c in s:
        depth += {"(": 1, ")": -1}.get(c, 0)
        if depth < 0:
            return False
    return depth == 0


def bound_extent(clause: str, var: str) -> str | None:
    """E when `clause` reads `var >= E` or `E <= var` (a bound on one output index), else None."""
    m = re.fullmatch(rf"\(?\s*{re.escape(var)}\s*>=\s*(.+?)\s*\)?", clause)
    if m and _balanced(m.group(1)):
        return m.group(1)
    m = re.fullmatch(rf"\(?\s*(.+?)\s*<=\s*{re.escape(var)}\s*\)?", clause)
    return m.group(1) if m and _balanced(m.group(1)) else None


def _update(src: CudaSource, stmt: ts.Node) -> tuple[str, str, str, str]:
    """(acc, X, Y, combine) of the loop's one statement."""
    while stmt.type == "compound_statement":
        inner = named(stmt)
        if len(inner) != 1:
            raise NotGemm("the K loop's body is not one accumulating statement")
        stmt = inner[0]
    e = stmt.named_children[0] if stmt.type == "expression_statement" and stmt.named_children else None
    if e is None or e.type != "assignment_expression":
        raise NotGemm("the K loop's body is not an assignment")
    left, right = e.child_by_field_name("left"), e.child_by_field_name("right")
    op = e.child_by_field_name("operator")
    if left is None or right is None or op is None or left.type != "identifier":
        raise NotGemm("the K loop does not accumulate into a scalar local")
    acc = src.text_of(left)
    right = unparenthesized(right)
    if op.type == "=" and right.type == "call_expression":
        args = T.call_args(right)
        if T.call_name(right) in ("fmaf", "fma", "__fmaf_rn") and len(args) == 3:
            if squash(src.text_of(args[2])) == acc:
                return acc, src.text_of(args[0]), src.text_of(args[1]), "fma"
        raise NotGemm("the K loop's update is not acc + X * Y")
    if (
        op.type == "="
        and right.type == "binary_expression"
        and src.text_of(right.child_by_field_name("operator")) == "+"
    ):
        lhs, rhs = right.child_by_field_name("left"), right.child_by_field_name("right")
        if squash(src.text_of(lhs)) == acc:
            right = rhs
        elif squash(src.text_of(rhs)) == acc:
            right = lhs
        else:
            raise NotGemm("the K loop's update is not acc + X * Y")
    elif op.type != "+=":
        raise NotGemm("the K loop's update is not acc += X * Y")
    right = unparenthesized(right)
    if right.type != "binary_expression" or src.text_of(right.child_by_field_name("operator")) != "*":
        raise NotGemm("the accumulated value is not a product of two factors")
    return (
        acc,
        src.text_of(right.child_by_field_name("left")),
        src.text_of(right.child_by_field_name("right")),
        "add",
    )


def _converts_to(prefix: str) -> str | None:
    """The type a factor's text before its load converts to: `(T)`, `static_cast<T>(`, `conv(`."""
    p = re.sub(r"(?:" + "|".join(_LOADS) + r")\(&$", "", squash(prefix))
    if not p:
        return None
    m = re.fullmatch(r"\((\w+)\)|static_cast<(\w+)>\(|(\w+)\(", p)
    if m is None:
        return None
    if m.group(3):
        return _CONVERSIONS.get(m.group(3))
    return m.group(1) or m.group(2)


def _pointer_elem(kernel: Function, name: str) -> str | None:
    p = next((p for p in kernel.params if p.name == name), None)
    if p is None or "*" not in p.type:
        return None
    return re.sub(r"\b(const|__restrict__|restrict|volatile)\b|\*", "", p.type).strip()


def analyze(src: CudaSource, kernel: Function) -> GemmLoop:
    """The GemmLoop of `kernel`; NotGemm with the failing structural fact otherwise."""
    fn = src.node_for(kernel)
    body = fn.child_by_field_name("body")
    if body is None:
        raise NotGemm("no body")
    stmts = named(body)
    loops = [i for i, s in enumerate(stmts) if s.type == "for_statement"]
    if len(loops) != 1:
        raise NotGemm(f"{len(loops)} top-level loops in the kernel body (one K loop expected)")
    li = loops[0]
    loop = stmts[li]
    cl = T.counting_loop(src, loop)
    if cl is None:
        raise NotGemm("the loop is not a counting loop `for (k = 0; k < EK; ++k)`")
    kvar, kinit, kcond, _upd, _step = cl
    if (
        eval_int(re.sub(r"(?<=\d)[uUlL]+\b", "", src.text_of(kinit)), {}) != 0
        or src.text_of(kcond.child_by_field_name("operator")) != "<"
    ):
        raise NotGemm("the K loop does not count from 0 while k < EK")
    k_extent = src.text_of(kcond.child_by_field_name("right"))
    kdecl = loop.child_by_field_name("initializer")
    ktype = src.text_of((kdecl.start_byte, kdecl.child_by_field_name("declarator").start_byte)).strip()
    acc, x, y, combine = _update(src, loop.child_by_field_name("body"))

    decls: dict[str, tuple[Local, str, ts.Node]] = {}
    guards: list[ts.Node] = []
    for s in stmts[:li]:
        d = _decl(src, s)
        if d is not None:
            decls[d[0].name] = (d[0], d[1], s)
            continue
        if s.type == "if_statement" and s.child_by_field_name("alternative") is None:
            cons = s.child_by_field_name("consequence")
            inner = named(cons) if cons.type == "compound_statement" else [cons]
            if len(inner) == 1 and squash(src.text_of(inner[0])) == "return;":
                guards.append(s)
                continue
        raise NotGemm(
            f"line {src.line_of(s.start_byte)}: a statement before the K loop that is neither a declaration nor the bound guard"
        )
    if acc not in decls:
        raise NotGemm(f"the accumulator {acc} is not declared with an initializer before the K loop")
    acc_local, acc_init, _ = decls.pop(acc)
    if not _thread_free(acc_init) or _names(acc_init) & set(decls):
        raise NotGemm(f"the accumulator's initial value {acc_init} is not launch-uniform")
    if not guards:
        raise NotGemm("no bound guard `if (row >= M || col >= N) return;`: the output extents are unknown")

    consts = file_constants(src)
    params = {p.name for p in kernel.params}
    macros = _macros(src)
    thread_locals = {n: v for n, v in decls.items() if not _thread_free(v[1])}
    for _ in range(len(decls)):  # through other locals: `row = idx / N`
        thread_locals |= {n: v for n, v in decls.items() if _names(v[1]) & set(thread_locals)}
    uniform = {n: v for n, v in decls.items() if n not in thread_locals}
    macros |= {n: lam for n, (_l, init, _s) in uniform.items() if (lam := _accessor_lambda(init))}
    operands = []
    for factor in (x, y):
        text = expand_macros(factor, macros)
        subs = [(p, i) for p, i in _subscripts(text) if p in params]
        if len(subs) != 1:
            raise NotGemm(f"the factor {factor} does not load exactly one element of a pointer parameter")
        pointer, index = subs[0]
        outs = _names(index) & set(thread_locals)
        if len(outs) != 1:
            raise NotGemm(f"the index of {pointer} reads {len(outs)} thread-index locals (one expected)")
        (out,) = outs
        others = (_names(text) - {out, kvar, pointer}) - set(consts) - set(macros)
        stray = others - params - set(uniform) - _TYPE_WORDS - set(_CONVERSIONS) - _LOADS
        if stray:
            raise NotGemm(
                f"the factor {factor} reads {', '.join(sorted(stray))} (not a parameter or uniform local)"
            )
        flat = index
        for _ in range(3):
            flat = subst_idents(flat, {n: paren(uniform[n][1]) for n in uniform})
        ustride = _affine(flat, out, kvar, _names(flat) - {out, kvar} - set(consts), consts)
        if ustride is None:
            raise NotGemm(f"the index of {pointer} is not affine in ({out}, {kvar})")
        elem = _pointer_elem(kernel, pointer)
        acc_t = acc_local.type.replace("const", "").strip()
        if (
            elem != acc_t
            and _converts_to(text[: re.search(rf"(?<![\w.]){re.escape(pointer)}\s*\[", text).start()])
            != acc_t
        ):
            raise NotGemm(
                f"the factor {factor} is not of the accumulator's type {acc_t}: staging it would change the rounding"
            )
        operands.append((out, Operand(factor, pointer, ustride == 1)))
    (oa, a), (ob, b) = operands
    if oa == ob:
        raise NotGemm(f"both factors read {oa}: not an outer-product loop nest")
    axes = {n: _thread_axis(thread_locals[n][1], consts) for n in (oa, ob)}
    split = None
    if None in axes.values() or axes[oa] == axes[ob]:
        split = _linear_split(thread_locals, oa, ob, consts)
        if split is None:
            raise NotGemm(
                "the output indices are neither blockIdx * blockDim + threadIdx on two different axes "
                "nor `i / E` and `i % E` of one such index"
            )
    lin = {split[0]} if split else set()
    extra = set(thread_locals) - {oa, ob} - lin
    if extra:
        raise NotGemm(f"other thread-dependent locals before the K loop: {', '.join(sorted(extra))}")
    clauses = [c for g in guards for c in _split_or(src.text_of(g.child_by_field_name("condition")))]
    cond = " || ".join(clauses)
    rc = tuple(c for c in clauses if _names(c) & ({oa} | lin))
    cc = tuple(c for c in clauses if ob in _names(c))
    if any(_names(c) & ({oa} | lin) and ob in _names(c) for c in clauses) or len(rc) + len(cc) != len(
        clauses
    ):
        raise NotGemm("a guard clause is not a bound on one output index")
    m_ext = next((e for c in rc if (e := bound_extent(c, oa))), None)
    n_ext = next((e for c in cc if (e := bound_extent(c, ob))), None)
    derived: tuple[str, ...] = ()
    if split:
        name, width = split
        n_ext = n_ext or width  # `i % E` is below E
        m_ext = m_ext or next((e for c in rc if (e := _rows_of(bound_extent(c, name), width))), None)
        ltype = thread_locals[name][0].type.replace("const", "").strip()
        derived = (f"const {ltype} {name} = {paren(oa)} * {paren(width)} + {ob};",)
        rc, cc = (f"{oa} >= {paren(m_ext or '')}",), (f"{ob} >= {paren(n_ext)}",)
        cond = " || ".join((*rc, *cc, *clauses))  # the tiled kernel also has threads past col's extent
    if m_ext is None or n_ext is None:
        raise NotGemm("the guard does not bound both output indices as `index >= extent`")

    epilogue = stmts[li + 1 :]
    for s in epilogue:
        if any(n.type in ("return_statement", "break_statement", "continue_statement") for n in T.walk(s)):
            raise NotGemm("the epilogue jumps (return, break or continue)")
        if re.search(r"__syncthreads|__shared__", src.text_of(s)):
            raise NotGemm("the epilogue synchronizes or uses shared memory")
        if _names(src.text_of(s)) & extra:
            raise NotGemm("the epilogue reads a thread-dependent local other than the output indices")
    return GemmLoop(
        kernel=kernel.name,
        row=thread_locals[oa][0],
        col=thread_locals[ob][0],
        k=Local(kvar, ktype),
        k_cond=src.text_of(kcond),
        k_extent=k_extent,
        acc=acc_local,
        acc_init=acc_init,
        combine=combine,
        a=a,
        b=b,
        row_clauses=rc,
        col_clauses=cc,
        m_extent=m_ext,
        n_extent=n_ext,
        guard=cond,
        uniform=tuple(src.text_of(v[2]) for v in uniform.values()),
        epilogue=tuple(src.text_of(s) for s in epilogue),
        derived=derived,
        body_start=body.start_byte,
        body_end=body.end_byte,
    )


def block_threads(src: CudaSource, launches: list[LaunchSite]) -> int | None:
    """Threads per block of `launches` when every one evaluates to the same count (a `dim3`
    local of the launcher read through), else None."""
    counts = set()
    consts = file_constants(src)
    for ls in launches:
        block = ls.block.strip()
        launcher = T.enclosing_launcher(src, ls)
        if re.fullmatch(r"\w+", block) and launcher is not None:
            decl = re.search(
                rf"\bdim3\s+(?:const\s+)?{re.escape(block)}\s*[({{]([^;]*)[)}}]\s*;", src.text_of(launcher)
            )
            block = decl.group(1) if decl else block
        block = re.sub(r"^dim3\s*[({](.*)[)}]$", r"\1", block)
        dims = (
            [eval_int(re.sub(r"(?<=\d)[uUlL]+\b", "", d), consts) for d in block.split(",")] if block else []
        )
        if not dims or any(d is None for d in dims):
            return None
        counts.add(math.prod(dims))  # type: ignore[arg-type]
    return counts.pop() if len(counts) == 1 else None
