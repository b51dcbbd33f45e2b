"""A shared-memory tiled GEMM read back to its naive form: what gemm_tiling's removal needs.

A tiled GEMM (any author's: register micro-tiles, warp tiles, double buffers, cp.async rings,
tensor-core MMAs) still says, in its global memory traffic, which function it computes. This
module reads that, on structure:

- each input operand is read at `P + offset` (or `P[offset]`) whose offset is a sum of terms
  `coordinate * stride` in exactly two coordinates: one that depends on one block index (the
  block's rows for A, its columns for B: the output coordinate) and one that does not (the
  position along K);
- the output is written at `C + offset` in the two output coordinates, the value being an
  expression of one accumulator element (and of the C element itself, for `beta * C`), either
  directly or through a shared-memory staging buffer whose stores are such expressions and whose
  copy to C moves elements unchanged (a packed pair of the same expression counts as one); or,
  for WMMA accumulator fragments, stored whole (`store_matrix_sync`) into a shared scratch tile
  that the output's expression reads an element of (the epilogue runs on the way out);
- the extents are the kernel parameters the coordinates are compared with (M, N) and the one the
  tiled K loop's trip count is computed from (K).

`naive_body` re-assembles one thread per output from those parts, in the canonical form
gemm_loop.analyze reads, so gemm_tiling's forward step applies to the result again.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

import tree_sitter as ts

from klineage.deopt import _cexpr as X
from klineage.deopt import _threads as T
from klineage.source.constructs import Function
from klineage.source.model import CudaSource
from klineage.source.syntax import eval_int, file_constants, paren, squash, unparenthesized

#: element type -> the conversion to the accumulator's float when the two differ
TO_FLOAT = {"__nv_bfloat16": "__bfloat162float", "__half": "__half2float", "half": "__half2float"}
#: calls that pack two converted elements into one 32-bit pair (each argument is one element)
PACKS = ("make_bfloat162", "make_half2", "__halves2bfloat162", "__halves2half2", "make_float2")
#: calls that convert two floats into one 16-bit pair, and the conversion each element gets
PAIR_CONVERSIONS = {"__floats2bfloat162_rn": "__float2bfloat16_rn", "__floats2half2_rn": "__float2half_rn"}
_UNIFORM_WORDS = {"size_t", "int", "long", "unsigned", "int64_t", "static_cast"}
#: a WMMA accumulator fragment type: rows, columns, element type (`using namespace` spellings too)
_ACC_FRAGMENT = re.compile(
    r"(?:(?:nvcuda::)?wmma::)?fragment\s*<\s*(?:(?:nvcuda::)?wmma::)?accumulator\s*,"
    r"\s*(\w+)\s*,\s*(\w+)\s*,\s*\w+\s*,\s*([\w:]+)\s*>"
)


class NotTiled(Exception):
    """The kernel is not a tiled GEMM this module can read; the message names the failing fact."""


@dataclass(frozen=True)
class Operand:
    pointer: str
    elem: str  # element type as declared (`float`, `__nv_bfloat16`)
    out_axis: str  # the block index (x, y, z) its output coordinate follows
    stride: str  # the stride of the non-unit coordinate (`K` in `row * K + k`)
    out_strided: bool  # True when the output coordinate is the strided one (row-major A)


@dataclass(frozen=True)
class TiledGemm:
    kernel: str
    a: Operand
    b: Operand
    c: Operand  # out_axis: the row axis; stride: the row stride
    m: str
    n: str
    k: str
    acc_type: str
    value: str  # the stored value, the accumulator written `{acc}` and the C element `{c}`
    body_start: int
    body_end: int
    #: accumulator elements a thread holds (1: one output per thread; None: not a constant)
    per_thread: int | None = 1
    #: the accumulators are WMMA fragments (tensor cores), not scalars in registers
    fragments: bool = False


@dataclass(frozen=True)
class _Def:
    name: str
    init: str
    start: int
    scope: ts.Node


def _defs(src: CudaSource, fn: ts.Node) -> list[_Def]:
    out = []
    for n in T.walk(fn):
        if n.type != "init_declarator":
            continue
        name, _, _ = X.declarator_name(n.child_by_field_name("declarator"))
        value = n.child_by_field_name("value")
        scope = X.enclosing(n, "compound_statement", "for_statement")
        if name and value is not None and scope is not None:
            out.append(_Def(name, src.text_of(value), n.start_byte, scope))
    return out


def _resolve(defs: list[_Def], name: str, pos: int) -> _Def | None:
    """The declaration of `name` in scope at byte `pos` (the innermost, latest one)."""
    seen = [
        d for d in defs if d.name == name and d.start < pos and d.scope.start_byte <= pos < d.scope.end_byte
    ]
    return max(seen, key=lambda d: d.start, default=None)


def _idents(text: str) -> set[str]:
    return set(re.findall(r"(?<![\w.])(?<!->)(?<!::)([A-Za-z_]\w*)(?!\w)", text))


def _axes(defs: list[_Def], text: str, pos: int, depth: int = 8) -> set[str]:
    """The block indices (`x`, `y`, `z`) `text` depends on, through the locals it reads."""
    axes = set(re.findall(r"\bblockIdx\.([xyz])\b", text))
    if depth == 0:
        return axes
    for name in _idents(text):
        d = _resolve(defs, name, pos)
        if d is not None and d.init != text:
            axes |= _axes(defs, d.init, d.start, depth - 1)
    return axes


def _terms(node: ts.Node) -> list[ts.Node]:
    node = unparenthesized(node)
    op = node.child_by_field_name("operator")
    if node.type == "binary_expression" and op is not None and op.type == "+":
        return _terms(node.child_by_field_name("left")) + _terms(node.child_by_field_name("right"))  # type: ignore[arg-type]
    return [node]


def _strip_cast(src: CudaSource, node: ts.Node) -> ts.Node:
    while node.type in ("cast_expression", "parenthesized_expression"):
        node = node.child_by_field_name("value") or node.named_children[-1]
    return node


class _Reader:
    def __init__(self, src: CudaSource, kernel: Function, k_loop: ts.Node | None = None) -> None:
        self.src = src
        self.scalars = _accumulated_scalars(src, k_loop) if k_loop is not None else set()
        self.kernel = kernel
        self.fn = src.node_for(kernel)
        self.defs = _defs(src, self.fn)
        self.params = {p.name: p for p in kernel.params}
        self.uniform = {p.name for p in kernel.params if "*" not in p.type} | {
            tp.name for tp in kernel.template_params
        }
        self.fixed = _fixed_flags(src, kernel)

    def live(self, node: ts.Node) -> bool:
        """False inside a branch that a template flag fixed at every launch never takes."""
        n = node
        while n.parent is not None and n is not self.fn:
            p = n.parent
            if p.type == "if_statement":
                cond = squash(self.src.text_of(p.child_by_field_name("condition"))).strip("()")  # type: ignore[arg-type]
                neg = cond.startswith("!")
                val = self.fixed.get(cond.lstrip("!"))
                if val is not None:
                    taken = val != neg
                    if (n == p.child_by_field_name("consequence")) != taken:
                        return False
            n = p
        return True

    def params_of(self, text: str, pos: int, depth: int = 6) -> set[str]:
        """The kernel parameters `text` reads, through the locals it reads."""
        out = set()
        for n in _idents(text):
            d = _resolve(self.defs, n, pos)
            if n in self.params:
                out.add(n)
            elif d is not None and depth:
                out |= self.params_of(d.init, d.start, depth - 1)
        return out

    def is_uniform(self, text: str, pos: int) -> bool:
        names = _idents(text) - _UNIFORM_WORDS
        out = True
        for n in names:
            if n in self.uniform or re.fullmatch(r"k[A-Z]\w*|[A-Z][A-Z0-9_]*", n):
                continue
            d = _resolve(self.defs, n, pos)
            out = (
                out
                and d is not None
                and self.is_uniform(d.init, d.start)
                and not _axes(self.defs, d.init, d.start)
            )
        return out

    def address(self, pointer: str, node: ts.Node) -> list[ts.Node]:
        """The offset terms of the address `pointer + ...` (or `pointer[...]`) `node` is part of."""
        top = node
        while top.parent is not None and top.parent.type in ("binary_expression", "parenthesized_expression"):
            op = top.parent.child_by_field_name("operator")
            if top.parent.type == "binary_expression" and (op is None or op.type != "+"):
                break
            top = top.parent
        if top is node and node.parent is not None and node.parent.type == "subscript_expression":
            idx = node.parent.child_by_field_name("indices") or node.parent.named_children[-1]
            return _terms(_strip_brackets(idx))
        return [t for t in _terms(top) if self.src.text_of(t) != pointer]

    def coordinates(self, pointer: str, terms: list[ts.Node]) -> dict[str, list[str]]:
        """stride text -> the coordinate texts of the terms with that stride ("1": unit stride)."""
        groups: dict[str, list[str]] = {}
        for t in terms:
            t = _strip_cast(self.src, t)
            op = t.child_by_field_name("operator")
            stride, coord = "1", t
            if t.type == "binary_expression" and op is not None and op.type == "*":
                left, right = t.child_by_field_name("left"), t.child_by_field_name("right")
                assert left is not None and right is not None
                if self.is_uniform(self.src.text_of(right), t.start_byte):
                    stride, coord = squash(self.src.text_of(right)), left
                elif self.is_uniform(self.src.text_of(left), t.start_byte):
                    stride, coord = squash(self.src.text_of(left)), right
                else:
                    raise NotTiled(f"{pointer}'s offset term `{self.src.text_of(t)}` has no uniform stride")
            if stride != "1" and not (_idents(stride) - _UNIFORM_WORDS) & set(self.params):
                coord, stride = t, "1"  # a compile-time multiple: part of the contiguous coordinate
            groups.setdefault(stride, []).append(self.src.text_of(_strip_cast(self.src, coord)))
        if len(groups) != 2 or "1" not in groups:
            raise NotTiled(f"{pointer}'s offset is not affine in two coordinates, one contiguous")
        return groups

    def operand(self, pointer: str, node: ts.Node, row_axis: str | None = None) -> tuple[Operand, list[str]]:
        """The operand read (or written) at `node`, and the texts of its output coordinate."""
        groups = self.coordinates(pointer, self.address(pointer, node))
        axes = {
            s: set().union(*(_axes(self.defs, c, node.start_byte) for c in cs)) for s, cs in groups.items()
        }
        stride = next(s for s in groups if s != "1")
        p = self.params[pointer]
        elem = re.sub(r"\b(const|__restrict__)\b|\*", "", p.type).strip()
        if row_axis is None:  # an input: one coordinate follows one block index, the other none
            dep = [s for s in groups if axes[s]]
            if len(dep) != 1 or len(axes[dep[0]]) != 1:
                raise NotTiled(f"{pointer} is not read at (block coordinate, k): block indices {axes}")
            return Operand(pointer, elem, next(iter(axes[dep[0]])), stride, dep[0] != "1"), groups[dep[0]]
        row = [s for s in groups if row_axis in axes[s]]
        if len(row) != 1 or any(len(a) != 1 for a in axes.values()):
            raise NotTiled(f"{pointer} is not written at (row, col) of the block: block indices {axes}")
        return Operand(pointer, elem, row_axis, stride, row[0] != "1"), groups[row[0]]

    def first_use(self, pointer: str) -> ts.Node:
        for n in T.walk(self.fn):
            if n.type == "identifier" and self.src.text_of(n) == pointer and n.parent is not None:
                if n.parent.type in ("binary_expression", "subscript_expression"):
                    return n
        raise NotTiled(f"{pointer} is never read at an offset")

    def bound(self, coords: list[str]) -> str | None:
        """The kernel parameter a coordinate is compared with (`gm < M`)."""
        names = set().union(*(_idents(c) for c in coords))
        for n in T.walk(self.fn):
            op = n.child_by_field_name("operator") if n.type == "binary_expression" else None
            if op is None or op.type not in ("<", ">=", "<=", ">"):
                continue
            lhs, rhs = (squash(self.src.text_of(n.child_by_field_name(f))) for f in ("left", "right"))  # type: ignore[arg-type]
            if op.type in ("<=", ">"):
                lhs, rhs = rhs, lhs
            if rhs in self.uniform and rhs in self.params and _idents(lhs) & names:
                return rhs
        return None


def _accumulated_scalars(src: CudaSource, loop: ts.Node) -> set[str]:
    """Scalars the K loop accumulates into (`s += x * y`, `s = fmaf(x, y, s)`)."""
    out = set()
    for n in T.walk(loop):
        left = n.child_by_field_name("left") if n.type == "assignment_expression" else None
        if left is None or left.type != "identifier":
            continue
        name, rhs = src.text_of(left), squash(src.text_of(n.child_by_field_name("right")))  # type: ignore[arg-type]
        op = n.child_by_field_name("operator")
        if (op is not None and op.type == "+=" and "*" in rhs) or re.fullmatch(rf"fmaf?\(.*,{name}\)", rhs):
            out.add(name)
    return out


def _fixed_flags(src: CudaSource, kernel: Function) -> dict[str, bool]:
    """Template parameters every launch sets to the same `true` / `false`."""
    out = {}
    launches = T.launches_of(src, kernel.name)
    for tp in kernel.template_params:
        vals = {squash(T.template_map(src, kernel, ls).get(tp.name, "")) for ls in launches}
        if launches and len(vals) == 1 and vals <= {"true", "false"}:
            out[tp.name] = vals == {"true"}
    return out


def _strip_brackets(node: ts.Node) -> ts.Node:
    return node.named_children[0] if node.type == "subscript_argument_list" and node.named_children else node


def read(src: CudaSource, kernel: Function, k_loop: ts.Node) -> TiledGemm:
    """The tiled GEMM `kernel`, its K loop over shared tiles `k_loop`, read to its naive parts."""
    r = _Reader(src, kernel, k_loop)
    ptrs = [p for p in kernel.params if "*" in p.type]
    inputs = [p.name for p in ptrs if re.search(r"\bconst\b", p.type)]
    outputs = [p.name for p in ptrs if not re.search(r"\bconst\b", p.type)]
    if len(inputs) != 2 or len(outputs) != 1:
        raise NotTiled(f"{len(inputs)} read-only and {len(outputs)} written pointers (want 2 and 1)")
    (oa, ra), (ob, rb) = (r.operand(p, r.first_use(p)) for p in inputs)
    if oa.out_axis == ob.out_axis:
        raise NotTiled(f"both operands follow blockIdx.{oa.out_axis}")
    if oa.out_axis != "y" and ob.out_axis == "y":
        (oa, ra), (ob, rb) = (ob, rb), (oa, ra)
    acc_node, value = _stored_value(r, outputs[0])
    acc_type = _acc_type(r, acc_node)
    oc, _ = r.operand(outputs[0], _c_address(r, outputs[0]), oa.out_axis)
    m, n = r.bound(ra), r.bound(rb)
    cond = k_loop.child_by_field_name("condition")
    ks = sorted(r.params_of(src.text_of(cond), k_loop.start_byte) & set(r.uniform)) if cond else []
    if m is None or n is None or len(ks) != 1:
        raise NotTiled(f"extents not read: rows {m}, columns {n}, K loop bound over {ks or 'no parameter'}")
    body = r.fn.child_by_field_name("body")
    assert body is not None
    lanes = _fragment(r, acc_node)
    per = _per_thread(r, acc_node)
    if lanes is not None:
        per = None if per is None or lanes[1] is None else per * lanes[1]
    return TiledGemm(
        kernel.name, oa, ob, oc, m, n, ks[0], acc_type, value, body.start_byte, body.end_byte, per,
        lanes is not None,
    )  # fmt: skip


def _c_address(r: _Reader, c: str) -> ts.Node:
    for n in T.walk(r.fn):
        if n.type == "identifier" and r.src.text_of(n) == c and n.parent is not None:
            if n.parent.type in ("binary_expression", "subscript_expression"):
                return n
    raise NotTiled(f"{c} is never written at an offset")


def _stores(r: _Reader, target: str | set[str]) -> list[tuple[ts.Node, ts.Node]]:
    """(address node, value node) of every store through a pointer to `target`: `p[i] = v`,
    `*(...)p... = v`, a call named *store* given the address first and the value last, or WMMA's
    `store_matrix_sync(address, fragment, ld, layout)` (the value: the fragment)."""
    alias = _Alias(r, {target} if isinstance(target, str) else target)
    out = []
    for n in T.walk(r.fn):
        if not r.live(n):
            continue
        if n.type == "assignment_expression":
            left, right = n.child_by_field_name("left"), n.child_by_field_name("right")
            if left is not None and right is not None and alias.any(_address_names(left), n.start_byte):
                out.append((left, right))
        elif n.type == "call_expression" and "store" in X.callee_name(n).lower():
            args = T.call_args(n)
            if len(args) >= 2 and alias.any(X.identifiers(args[0]), n.start_byte):
                wmma = X.callee_name(n).endswith("store_matrix_sync")
                out.append((args[0], args[1] if wmma else args[-1]))
    return out


def _address_names(left: ts.Node) -> set[str]:
    """The names an assignment's target addresses memory through (`p` of `p[i]`, `*(T*)(p + o)`)."""
    if left.type == "subscript_expression":
        base = left
        while base.type == "subscript_expression":
            base = base.child_by_field_name("argument") or base.named_children[0]
        return X.identifiers(base)
    return X.identifiers(left) if left.type == "pointer_expression" else set()


class _Alias:
    """`names` and the pointer locals initialised from them (`float* p = C + off;`), by scope."""

    def __init__(self, r: _Reader, names: set[str]) -> None:
        self.r, self.names = r, names
        self.defs: set[int] = set()
        for d in r.defs:
            pointerish = re.search(r"[*&+]|reinterpret_cast|\bstatic_cast", d.init) is not None
            if pointerish and self.any(_idents(d.init), d.start):
                self.defs.add(id(d))

    def __call__(self, name: str, pos: int) -> bool:
        d = _resolve(self.r.defs, name, pos)
        return name in self.names or (d is not None and id(d) in self.defs)

    def any(self, names: set[str], pos: int) -> bool:
        return any(self(n, pos) for n in names)


def _stored_value(r: _Reader, c: str) -> tuple[ts.Node, str]:
    """(an accumulator element node, the value stored in terms of `{acc}` and `{c}`)."""
    stores = _stores(r, c)
    if not stores:
        raise NotTiled(f"no store to {c}")
    shared = {d.name for d in r.src.shared_decls}
    values = set()
    acc_seen = None
    for _addr, v in stores:
        text = r.src.text_of(v)
        staged = {s for s in _idents(text) if _is_shared(r, s, shared, v.start_byte)}
        if staged:
            v_acc, expr = _fragment_value(r, v, staged) or _staged_value(r, staged)
        else:
            v_acc, expr = _element_value(r, v, c)
        acc_seen = acc_seen or v_acc
        values.add(expr)
    if len(values) != 1 or acc_seen is None:
        raise NotTiled(f"the stores to {c} write {len(values)} different expressions of the accumulator")
    return acc_seen, values.pop()


def _is_shared(r: _Reader, name: str, shared: set[str], pos: int, depth: int = 4) -> bool:
    if name in shared:
        return True
    d = _resolve(r.defs, name, pos)
    return (
        depth > 0
        and d is not None
        and any(_is_shared(r, s, shared, d.start, depth - 1) for s in _idents(d.init))
    )


def _shared_bases(r: _Reader, name: str, pos: int, shared: set[str], depth: int = 4) -> set[str]:
    """The shared arrays `name` is (or points into, or was copied from), through its locals."""
    if name in shared:
        return {name}
    d = _resolve(r.defs, name, pos)
    if depth == 0 or d is None:
        return set()
    return set().union(*(_shared_bases(r, s, d.start, shared, depth - 1) for s in _idents(d.init)))


def _fragment_value(r: _Reader, v: ts.Node, staged: set[str]) -> tuple[ts.Node, str] | None:
    """A WMMA epilogue: accumulator fragments go whole into a shared scratch tile
    (`store_matrix_sync`) and the output's value `v` reads a scratch element (or a local copied
    from one): that read is the accumulator element. None when no fragment is stored there."""
    shared = {d.name for d in r.src.shared_decls}
    bases = set().union(*(_shared_bases(r, s, v.start_byte, shared) for s in staged))
    frags = [val for _, val in _stores(r, bases) if _fragment(r, val) is not None] if bases else []
    if not frags:
        return None

    def rewrite(n: ts.Node) -> str | None:
        if n.type == "subscript_expression" and _address_names(n) & staged:
            return "{acc}"
        return "{acc}" if n.type == "identifier" and r.src.text_of(n) in staged else None

    return frags[0], " ".join(X.render(r.src, v, rewrite).split())


def _fragment(r: _Reader, node: ts.Node) -> tuple[str, int | None] | None:
    """(element type, elements a lane holds) when `node` is a WMMA accumulator fragment (or an
    element of an array of them), else None."""
    base = node
    while base.type == "subscript_expression":
        base = base.child_by_field_name("argument") or base.named_children[0]
    decl = X.declared_type(r.src, r.fn, r.src.text_of(base)) if base.type == "identifier" else None
    m = _ACC_FRAGMENT.fullmatch(squash(decl[0]).replace("const ", "")) if decl is not None else None
    if m is None:
        return None
    rows, cols = (eval_int(x, file_constants(r.src)) for x in (m.group(1), m.group(2)))
    return m.group(3), None if rows is None or cols is None else rows * cols // 32


def _staged_value(r: _Reader, staged: set[str]) -> tuple[ts.Node, str]:
    """The per-element expression stored into the shared buffer the output is copied from."""
    exprs, acc = set(), None
    for _, v in _stores(r, staged):
        callee = X.callee_name(v) if v.type == "call_expression" else ""
        elems = T.call_args(v) if callee in PACKS or callee in PAIR_CONVERSIONS else [v]
        for e in elems:
            a, text = _element_value(r, e, None)
            if callee in PAIR_CONVERSIONS:
                text = f"{PAIR_CONVERSIONS[callee]}({text})"
            acc = acc or a
            exprs.add(text)
    if len(exprs) != 1 or acc is None:
        raise NotTiled("the staged output is not one expression of an accumulator element")
    return acc, exprs.pop()


def _accumulator_reads(r: _Reader, v: ts.Node) -> list[ts.Node]:
    """Outermost subscripts under `v` of a local (non-shared) array or a pointer into one."""
    out = []
    for n in T.walk(v):
        if n.type == "identifier" and _is_scalar_accumulator(r, n):
            out.append(n)
            continue
        if n.type != "subscript_expression" or (
            n.parent is not None and n.parent.type == "subscript_expression"
        ):
            continue
        base = n
        while base.type == "subscript_expression":
            base = base.child_by_field_name("argument") or base.named_children[0]
        if base.type == "identifier" and _is_register_array(r, r.src.text_of(base), n.start_byte):
            out.append(n)
    return out


def _is_scalar_accumulator(r: _Reader, n: ts.Node) -> bool:
    """A scalar the K loop accumulates into, or a local copied from an accumulator element."""
    name = r.src.text_of(n)
    if name in r.scalars:
        return True
    d = _resolve(r.defs, name, n.start_byte)
    base = re.match(r"\s*(\w+)\s*\[", d.init) if d is not None else None
    return base is not None and _is_register_array(r, base.group(1), d.start)  # type: ignore[union-attr]


def _is_register_array(r: _Reader, name: str, pos: int) -> bool:
    decl = X.declared_type(r.src, r.fn, name)
    if decl is None or name in {d.name for d in r.src.shared_decls} or name in r.params:
        return False
    d = _resolve(r.defs, name, pos)
    if d is not None and not d.init.lstrip().startswith("{"):  # `= {0}` initialises an array
        # a pointer into a register array: `const float* v = &acc[i][j];`
        base = re.match(r"\s*&\s*(\w+)\s*\[", d.init)
        return base is not None and _is_register_array(r, base.group(1), d.start)
    return decl[1]


def _element_value(r: _Reader, v: ts.Node, c: str | None) -> tuple[ts.Node, str]:
    reads = _accumulator_reads(r, v)
    if not reads:
        raise NotTiled(f"the stored value `{squash(r.src.text_of(v))}` reads no accumulator")
    c_alias = _Alias(r, {c} if c else set())

    def rewrite(n: ts.Node) -> str | None:
        if n in reads:
            return "{acc}"
        if n.type == "subscript_expression" and c_alias.any(_address_names(n), n.start_byte):
            return "{c}"
        if n.type == "call_expression" and "load" in X.callee_name(n).lower():
            if c_alias.any(X.identifiers(n), n.start_byte):
                return "{c}"
        return None

    return reads[0], " ".join(X.render(r.src, v, rewrite).split())


def _per_thread(r: _Reader, node: ts.Node) -> int | None:
    """Elements of the accumulator array behind `node` (1 for a scalar), None when not constant."""
    name = r.src.text_of(node)
    d = _resolve(r.defs, name, node.start_byte) if node.type == "identifier" else None
    if node.type == "identifier" and name in r.scalars:
        return 1
    base = re.match(r"\s*&?\s*(\w+)\s*\[", d.init) if d is not None else None
    if node.type == "subscript_expression":
        while node.type == "subscript_expression":
            node = node.child_by_field_name("argument") or node.named_children[0]
        base_name = r.src.text_of(node)
        d = _resolve(r.defs, base_name, node.start_byte)
        base = re.match(r"\s*&\s*(\w+)\s*\[", d.init) if d is not None else None
        name = base.group(1) if base else base_name
    elif base is not None:
        name = base.group(1)
    else:
        return 1
    for decl in T.walk(r.fn):
        if decl.type == "array_declarator" and X.declarator_name(decl)[0] == name:
            dims = re.findall(r"\[([^\]]*)\]", squash(r.src.text_of(decl)))
            vals = [eval_int(x, file_constants(r.src)) for x in dims]
            return None if any(v is None for v in vals) else math.prod(vals)  # type: ignore[misc]
    return None


def _acc_type(r: _Reader, node: ts.Node) -> str:
    base = node
    while base.type == "subscript_expression":
        base = base.child_by_field_name("argument") or base.named_children[0]
    name = r.src.text_of(base)
    d = _resolve(r.defs, name, node.start_byte)
    if d is not None:
        m = re.match(r"\s*&\s*(\w+)", d.init)
        name = m.group(1) if m else name
    decl = X.declared_type(r.src, r.fn, name)
    if decl is None:
        raise NotTiled(f"the accumulator {name} has no declared type")
    frag = _fragment(r, node)
    return frag[0] if frag is not None else decl[0].replace("const", "").strip()


def naive_body(t: TiledGemm, taken: set[str]) -> str:
    """One thread per output of `t`, in the canonical naive form gemm_loop reads."""
    row, col, k, acc = (n if n not in taken else f"kl_{n}" for n in ("row", "col", "k", "acc"))
    axes = {"y": t.a.out_axis, "x": t.b.out_axis}

    def index(o: Operand, out: str, inner: str) -> str:
        return (
            f"(size_t){out} * {paren(o.stride)} + {inner}"
            if o.out_strided
            else f"(size_t){inner} * {paren(o.stride)} + {out}"
        )

    def factor(o: Operand, out: str) -> str:
        read = f"{o.pointer}[{index(o, out, k)}]"
        conv = TO_FLOAT.get(o.elem) if o.elem != t.acc_type else None
        return f"{conv}({read})" if conv else read

    c_elem = f"{t.c.pointer}[{index(t.c, row, col)}]"
    value = t.value.replace("{acc}", acc).replace("{c}", c_elem)
    zero = "0.0f" if t.acc_type == "float" else f"static_cast<{t.acc_type}>(0)"
    return (
        "{\n"
        f"    const int {row} = blockIdx.{axes['y']} * blockDim.{axes['y']} + threadIdx.{axes['y']};\n"
        f"    const int {col} = blockIdx.{axes['x']} * blockDim.{axes['x']} + threadIdx.{axes['x']};\n"
        f"    if ({row} >= {t.m} || {col} >= {t.n}) return;\n"
        f"    {t.acc_type} {acc} = {zero};\n"
        f"    for (int {k} = 0; {k} < {t.k}; ++{k}) {acc} += {factor(t.a, row)} * {factor(t.b, col)};\n"
        f"    {c_elem} = {value};\n"
        "}"
    )
