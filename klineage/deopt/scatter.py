"""Scattered atomic updates of a small output: what privatized_atomics reads on a kernel.

An update is a statement `atomicOp(&out[idx], v);` (or `atomicOp(out + idx, v);`) whose result
is unused, `out` a pointer parameter of the kernel and `idx` read from loaded data (a histogram, a
bincount, a scatter-add into a table). The output's extent B bounds every index: an 8-bit
unsigned index (256), a guard `idx < K` (or an early return on `idx >= K`) with K fixed at
compile time, or the launcher clearing the output with `cudaMemset(out, 0, K * sizeof(T))`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import tree_sitter as ts

from klineage.deopt import _threads as T
from klineage.deopt._cexpr import declared_type
from klineage.source.constructs import Function
from klineage.source.model import CudaSource
from klineage.source.syntax import assigned_in, unparenthesized

#: the atomic read-modify-writes whose operation is associative and commutative on integers
ATOMICS = r"atomic(?:Add|Max|Min|Or|And|Xor)"
#: shared memory one private copy may take (bytes): leaves room for the kernel's own
SMEM_LIMIT = 32 * 1024

_SIZES = {
    "int": 4,
    "unsigned": 4,
    "unsigned int": 4,
    "int32_t": 4,
    "uint32_t": 4,
    "float": 4,
    "double": 8,
    "long long": 8,
    "long long int": 8,
    "unsigned long long": 8,
    "unsigned long long int": 8,
    "uint64_t": 8,
}
_SIGNED = {"int", "int32_t", "long long", "long long int"}
_BYTE_TYPES = ("uint8_t", "unsigned char")


@dataclass(frozen=True)
class Update:
    """One scattered atomic: its statement, call, operation, output name and index node."""

    stmt: ts.Node
    call: ts.Node
    op: str
    base: str
    index: ts.Node
    addr: ts.Node


def element_type(param_type: str) -> str:
    """`const float* __restrict__` -> `float`."""
    t = re.sub(r"\b(const|volatile|__restrict__|__restrict|restrict)\b|\*", " ", param_type)
    return " ".join(t.split())


def identity(op: str, ty: str) -> str | None:
    """The value a private copy starts from (the operation's identity), None if not supported."""
    if ty not in _SIZES:
        return None
    floating = ty in ("float", "double")
    if op == "atomicAdd":
        return "0.0f" if ty == "float" else "0.0" if floating else "0"
    if floating:
        return None
    if op in ("atomicOr", "atomicXor"):
        return "0"
    if _SIZES[ty] != 4:
        return None
    if op == "atomicAnd":
        return "~0u" if ty not in _SIGNED else "-1"
    if op == "atomicMax":
        return "(-2147483647 - 1)" if ty in _SIGNED else "0u"
    if op == "atomicMin":
        return "2147483647" if ty in _SIGNED else "0xffffffffu"
    return None


def size_of(ty: str) -> int | None:
    return _SIZES.get(ty)


def update_of(src: CudaSource, call: ts.Node) -> Update | None:
    """The update `call` makes, when it is a statement adding into `&P[idx]` or `P + idx`."""
    args = T.call_args(call)
    stmt = call.parent
    if len(args) != 2 or stmt is None or stmt.type != "expression_statement":
        return None
    if stmt.named_children[0] != call:
        return None
    a = unparenthesized(args[0])
    base, index = None, None
    if a.type == "pointer_expression" and src.text_of(a).lstrip().startswith("&"):
        sub = unparenthesized(a.child_by_field_name("argument"))
        if sub.type == "subscript_expression":
            arr = sub.child_by_field_name("argument")
            idx = sub.child_by_field_name("indices")
            if arr is not None and arr.type == "identifier" and idx is not None and idx.named_children:
                base, index = src.text_of(arr), idx.named_children[0]
    elif a.type == "binary_expression" and a.child_by_field_name("operator").type == "+":
        left = a.child_by_field_name("left")
        if left is not None and left.type == "identifier":
            base, index = src.text_of(left), a.child_by_field_name("right")
    if base is None or index is None:
        return None
    return Update(stmt, call, T.call_name(call), base, index, args[0])


def updates(src: CudaSource, fn: ts.Node) -> list[Update]:
    """Every recognised scattered update in `fn`, in source order."""
    return [u for c in T.calls_named(fn, ATOMICS) if (u := update_of(src, c)) is not None]


def data_dependent(src: CudaSource, fn: ts.Node, text: str) -> bool:
    """Whether index text reads memory (a subscript, a dereference, __ldg), through locals. A local
    declared in several scopes (a vectorized loop and its scalar tail each declare their `c`) counts
    when every one of its initializers reads memory."""
    return _reads_memory(src, fn, text, set())


def _reads_memory(src: CudaSource, fn: ts.Node, text: str, seen: set[str]) -> bool:
    t = T.squash(text)
    if re.search(r"\w\[|__ldg\(|(?:^|[-(,=+*/%&|!~<>?:])\*[\w(]", t):
        return True
    for name in sorted(set(re.findall(r"(?<![\w.])([A-Za-z_]\w*)", t)) - seen):
        seen.add(name)
        inits = _initializers(src, fn, name)
        if inits and all(_reads_memory(src, fn, i, seen) for i in inits):
            return True
    return False


def _initializers(src: CudaSource, fn: ts.Node, name: str) -> list[str]:
    """The initializer texts of every declaration of local `name` in `fn`; none when it is
    reassigned or one of them has no initializer."""
    if name in assigned_in(fn):
        return []
    decls = [d for d in T.walk(fn) if d.type == "init_declarator" and T.declarator_ident(d) == name]
    values = [d.child_by_field_name("value") for d in decls]
    return [src.text_of(v) for v in values] if values and all(v is not None for v in values) else []


def other_uses(src: CudaSource, fn: ts.Node, base: str, ups: list[Update]) -> list[int]:
    """Lines where `base` is read or written other than as the output of one of `ups`."""
    body = fn.child_by_field_name("body")
    inside = [(u.addr.start_byte, u.addr.end_byte) for u in ups]
    lines = []
    for n in T.walk(body) if body is not None else []:
        if n.type == "identifier" and src.text_of(n) == base:
            if not any(s <= n.start_byte < e for s, e in inside):
                lines.append(n.start_point.row + 1)
    return lines


def _byte_typed(src: CudaSource, fn: ts.Node, kernel: Function, text: str) -> bool:
    """Whether index text is (a cast of) a load of an 8-bit unsigned array or local."""
    t = T.strip_casts(T.resolve_local(src, fn, text))
    m = re.fullmatch(r"\(?(?:__ldg\(&)?(\w+)\[.*\]\)?", t)
    if m is None:
        return False
    declared = declared_type(src, fn, m.group(1))
    return declared is not None and declared[1] and element_type(declared[0]) in _BYTE_TYPES


def _guard_bound(src: CudaSource, stmt: ts.Node, idx: str, consts: dict[str, int]) -> int | None:
    """K when the update only runs with idx < K (K a compile-time integer)."""
    for g, cond in T.guards(src, stmt):
        returns = g.type == "if_statement" and _early_return(g, stmt)
        parts = re.split(r"\|\|", T.squash(cond).strip("()")) if returns else T.squash(cond).split("&&")
        for p in parts:
            p = p.strip("()")
            if returns:
                m = re.fullmatch(rf"{re.escape(idx)}>=(.+)|(.+)<={re.escape(idx)}", p)
            else:
                m = re.fullmatch(rf"{re.escape(idx)}<(.+)|(.+)>{re.escape(idx)}", p)
            if m:
                k = T.eval_int(next(x for x in m.groups() if x), consts)
                if k is not None:
                    return k
    return None


def _early_return(g: ts.Node, stmt: ts.Node) -> bool:
    """Whether guard `g` is an earlier `if (...) return;` (its condition is the exit condition)."""
    return not (g.start_byte <= stmt.start_byte < g.end_byte)


def _cleared_extent(src: CudaSource, kernel: Function, base: str, consts: dict[str, int]) -> int | None:
    """K when every launch's argument for `base` is cleared by the launcher with a memset of
    K * sizeof(element) bytes before the launch."""
    pos = next((i for i, p in enumerate(kernel.params) if p.name == base), None)
    p_type = element_type(kernel.params[pos].type) if pos is not None else ""
    launches = T.launches_of(src, kernel.name)
    found: set[int | None] = set()
    for ls in launches:
        launcher = T.enclosing_launcher(src, ls)
        if pos is None or launcher is None or pos >= len(ls.args):
            return None
        arg = T.squash(ls.args[pos])
        k = None
        for c in T.calls_named(launcher, r"cudaMemset(?:Async)?"):
            a = T.call_args(c)
            if c.start_byte > src.node_for(ls).start_byte or len(a) < 3 or T.squash(src.text_of(a[0])) != arg:
                continue
            if T.squash(src.text_of(a[1])) != "0":
                continue
            k = _count_of_bytes(T.squash(src.text_of(a[2])), p_type, consts)
        found.add(k)
    return found.pop() if len(found) == 1 else None


def _count_of_bytes(b: str, ty: str, consts: dict[str, int]) -> int | None:
    size = _SIZES.get(ty)
    if size is None:
        return None
    m = re.fullmatch(r"\(?(.+?)\)?\*sizeof\((.+)\)|sizeof\((.+)\)\*\(?(.+?)\)?", b)
    if m:
        count, of = (m.group(1), m.group(2)) if m.group(1) else (m.group(4), m.group(3))
        if element_type(of) != ty and _SIZES.get(element_type(of)) != size:
            return None
        return T.eval_int(count, consts)
    total = T.eval_int(b, consts)
    return total // size if total is not None and total % size == 0 else None


def extent(src: CudaSource, fn: ts.Node, kernel: Function, ups: list[Update]) -> tuple[int | None, str]:
    """(B, how it is known) for the output all `ups` update, or (None, why not)."""
    consts = T.file_constants(src)
    cleared = _cleared_extent(src, kernel, ups[0].base, consts)
    if cleared is not None:
        return cleared, f"the launcher clears {cleared} elements of {ups[0].base}"
    bounds = []
    for u in ups:
        idx = T.squash(src.text_of(u.index))
        if _byte_typed(src, fn, kernel, src.text_of(u.index)):
            bounds.append((256, "an 8-bit unsigned index"))
            continue
        k = _guard_bound(src, u.stmt, idx, consts)
        if k is None:
            return None, f"nothing bounds the index {idx} at line {u.stmt.start_point.row + 1}"
        bounds.append((k, f"a guard {idx} < {k}"))
    b = max(k for k, _ in bounds)
    return b, "; ".join(sorted({w for _, w in bounds}))
