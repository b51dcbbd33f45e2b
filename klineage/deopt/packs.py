"""Forward vectorization by 16-byte packs: elementwise kernels and contiguous row loops.

Two shapes of naive code that other authors write, both a body run once per element `i` of a
contiguous range:
- the one-thread-per-element kernel: a global index, a bound check and a body
  (`int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) y[i] = f(x[i]);`, or the early-return
  spelling `if (i >= n) return; ...`). Thread t then takes the elements [t*W, t*W + W); the launch is
  left alone, so threads past the packed range return at once;
- a row loop that partitions a row among the threads of a row (`for (j = 0; j < N; ++j)`,
  `for (j = threadIdx.x; j < N; j += blockDim.x)`, `for (j = lane; j < N; j += 32)`, a grid-stride
  loop): the threads then partition the row's packs the same way, and a scalar loop of the same
  shape takes the elements after the last full pack.

Every array accessed at exactly `[i]` (or `[base + i]`, base invariant) is read or written as one
16-byte pack (float4 for float, uint4 carrying 8 halves or bfloat16s, ...) and the body runs once per
lane with `i` bound to that lane's element, so any other use of `i` keeps its meaning. A pointer that
is not pack-aligned (an odd row length moves every other row's base) sends the thread down the
original scalar code: the alignment dispatch. Odd lengths and offset pointers therefore stay exact.

The preconditions are read on structure, not spelling: the index forms and bound checks above in
any order, cast or spelling; lanes that share nothing (no barrier, warp collective, thread-position
read or pointer escaping); an array written at `[i]` touched nowhere else; in a row loop, values
carried across elements only by commutative updates (`s += e`, `m = fmaxf(m, e)`, ...) that nothing
else in the body reads, since the elements change threads and order.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType

import tree_sitter as ts

from klineage.deopt import _cexpr as X
from klineage.deopt import _threads as T
from klineage.deopt import pack_grid
from klineage.deopt.base import Precondition
from klineage.deopt.rows import COLLECTIVE
from klineage.deopt.rows import LOOPS as ROW_LOOPS
from klineage.source import edit, memo
from klineage.source.model import CudaSource
from klineage.source.syntax import (
    eval_int,
    file_constants,
    fresh_numbered,
    squash,
    unparenthesized,
    writes_to,
    written_names,
)

PACK_BYTES = pack_grid.PACK_BYTES
#: element sizes of the scalar types a pack can carry
ELEMENT_BYTES = {
    "float": 4,
    "double": 8,
    "int": 4,
    "unsigned": 4,
    "unsigned int": 4,
    "uint32_t": 4,
    "int32_t": 4,
    "long long": 8,
    "int64_t": 8,
    "uint64_t": 8,
    "short": 2,
    "int16_t": 2,
    "uint16_t": 2,
    "__half": 2,
    "half": 2,
    "__nv_bfloat16": 2,
    "nv_bfloat16": 2,
    "char": 1,
    "signed char": 1,
    "unsigned char": 1,
    "int8_t": 1,
    "uint8_t": 1,
}
#: the register type of a pack of `bytes` bytes (float lanes keep float vectors)
_RAW = {16: "uint4", 8: "uint2", 4: "unsigned int", 2: "unsigned short"}
_FLOAT_RAW = {16: "float4", 8: "float2", 4: "float"}
_THREAD_POSITION = re.compile(r"\b(?:threadIdx|blockIdx|blockDim|gridDim)\b|__shared__|\bcg::")
_BARRIER = re.compile(r"__syncthreads\w*|__threadfence\w*")
#: the comparison with the index on the left -> the in-range test: `i < n` / `i <= n` guard a body,
#: `i >= n` / `i > n` return early (so the element exists when `i < n` / `i <= n`)
_UPPER = {"<": "<", "<=": "<=", ">=": "<", ">": "<="}
_FLIP = {"<": ">", "<=": ">=", ">": "<", ">=": "<="}
_COMMUTATIVE_CALLS = re.compile(r"fmaxf|fminf|fmax|fmin|max|min|::max|::min")
#: an alignment test on pointers (squashed text): a pointer cast to an integer, `% 16` / `& 15` == 0
_INT_CAST = re.compile(
    r"reinterpret_cast<(?:unsigned(?:long)*|uintptr_t|size_t|u?int64_t)>\(|\((?:uintptr_t|size_t|unsignedlonglong|u?int64_t)\)"
)
_MODULO_ZERO = re.compile(r"(?:%(?:16u?|sizeof\(\w+\))|&(?:15u?|0xf))\)*==0")


@dataclass(frozen=True)
class PackedArray:
    """A pointer accessed only at `[base + i]`: its element type and whether the body reads/writes it."""

    name: str
    element: str
    base: str
    read: bool
    written: bool

    @property
    def origin(self) -> str:
        """The pointer to element 0 of the range."""
        return self.name if not self.base else f"{self.name} + {X.wrap_text(self.base)}"


@dataclass(frozen=True)
class Lanes:
    """A body run once per element `index` of a contiguous range, with its packable arrays."""

    fn: ts.Node
    index: str
    index_type: str
    body: list[ts.Node]
    arrays: list[PackedArray]
    refusals: list[str]

    @property
    def width(self) -> int:
        return PACK_BYTES // max(ELEMENT_BYTES[a.element] for a in self.arrays) if self.arrays else 0


@dataclass(frozen=True)
class ElementwiseKernel:
    """A one-thread-per-element kernel: its bound check (the site) and in-range test `i op bound`."""

    lanes: Lanes
    guard: ts.Node
    op: str
    bound: str


@dataclass(frozen=True)
class RowLoop:
    """`for (T j = start; j < bound; j += step)` partitioning a contiguous range among threads."""

    lanes: Lanes
    loop: ts.Node
    start: str
    step: str
    bound: str


# ---- shared analysis --------------------------------------------------------------------------


def _base_type(type_text: str) -> str:
    t = re.sub(r"\b(const|volatile|__restrict__|__restrict|restrict)\b|\*", " ", type_text)
    return " ".join(t.split())


def statements(node: ts.Node) -> list[ts.Node]:
    if node.type == "compound_statement":
        return [c for c in node.named_children if c.type != "comment"]
    return [node]


def _pointers(src: CudaSource, fn: ts.Node) -> dict[str, str]:
    """Pointer parameters and locals of `fn` -> element type text (a function's answer once per
    source text: every pack site of a kernel asks again, and the answer reads the whole file)."""
    known = _pointers_by_function(src).get(fn.byte_range) if fn.type == "function_definition" else None
    return dict(known) if known is not None else _pointers_of(src, fn)


@memo.per_text(maxsize=64)
def _pointers_by_function(src: CudaSource) -> Mapping[tuple[int, int], Mapping[str, str]]:
    return MappingProxyType(
        {
            f.byte_range: MappingProxyType(_pointers_of(src, f))
            for f in X.walk(src.tree.root_node)
            if f.type == "function_definition"
        }
    )


def _pointers_of(src: CudaSource, fn: ts.Node) -> dict[str, str]:
    names = {n.text.decode() for n in X.walk(fn) if n.type == "identifier" and n.text is not None}
    out = {}
    for name in names - _register_arrays(fn):
        dt = X.declared_type(src, fn, name)
        if dt is not None and dt[1]:
            out[name] = _base_type(dt[0])
    return out


def _subscript_index(sub: ts.Node) -> ts.Node | None:
    idx = next((c for c in sub.children if c.type == "subscript_argument_list"), None)
    return idx.named_children[0] if idx is not None and idx.named_children else None


def _exact_base(src: CudaSource, inner: ts.Node | None, index: str, written: set[str]) -> str | None:
    """'' for `[i]`, the base text for `[base + i]` / `[i + base]` (base invariant), else None."""
    if inner is None:
        return None
    if T.strip_casts(src.text_of(inner)) == index:
        return ""
    if inner.type == "binary_expression" and src.text_of(inner.children[1]) == "+":
        left, right = inner.child_by_field_name("left"), inner.child_by_field_name("right")
        for a, b in ((left, right), (right, left)):
            if a is not None and b is not None and T.strip_casts(src.text_of(a)) == index:
                ids = X.identifiers(b)
                if index not in ids and not (ids & written) and not X.has_side_effects(b):
                    return src.text_of(b)
    return None


def _address_taken(sub: ts.Node) -> bool:
    """Whether `sub` (an element access) sits under `&`, through parentheses, for anything but a
    read-only load (`__ldg(&x[i])` reads the element; an atomic or a callee may write it)."""
    p = sub.parent
    while p is not None and p.type == "parenthesized_expression":
        p = p.parent
    if p is None or p.type != "pointer_expression" or p.children[0].type != "&":
        return False
    call = p.parent.parent if p.parent is not None and p.parent.type == "argument_list" else None
    return not (call is not None and re.fullmatch(r"__ld(?:g|ca|cg|cs|lu|cv)", T.call_name(call) or ""))


def _write_of(sub: ts.Node) -> ts.Node | None:
    """The assignment that writes the element `sub` names, or None for a read."""
    p = sub.parent
    while p is not None and p.type == "parenthesized_expression":
        sub, p = p, p.parent
    if p is not None and p.type == "assignment_expression" and p.child_by_field_name("left") == sub:
        return p
    if p is not None and p.type == "update_expression":
        return p
    return None


def _plain(src: CudaSource, write: ts.Node) -> bool:
    return write.type == "assignment_expression" and src.text_of(write.children[1]) == "="


def _statement_of(n: ts.Node, body: list[ts.Node]) -> int | None:
    """The position in `body` of the top-level statement holding `n`."""
    return next(
        (k for k, b in enumerate(body) if b.start_byte <= n.start_byte and n.end_byte <= b.end_byte), None
    )


def _needs_load(src: CudaSource, reads: list[ts.Node], writes: list[ts.Node], body: list[ts.Node]) -> bool:
    """Whether the pack must be read from memory: some read may see the old element (a read with no
    plain top-level write of the element in an earlier statement, e.g. `y[i] = e; s += y[i];` needs none)."""
    if not reads:
        return False
    first = [
        k
        for w in writes
        if _plain(src, _write_of(w))
        and _top_level_once([w], body)
        and (k := _statement_of(w, body)) is not None
    ]
    if not first:
        return True
    at = min(first)
    return any((k := _statement_of(r, body)) is None or k <= at for r in reads)


def _top_level_once(writes: list[ts.Node], body: list[ts.Node]) -> bool:
    """One write, as a statement of the body's top level (so every lane of a pack is stored)."""
    if len(writes) != 1:
        return False
    stmt = writes[0].parent
    while stmt is not None and stmt.type != "expression_statement":
        stmt = stmt.parent
    return stmt is not None and any(stmt == b for b in body)


def _jumps(body: list[ts.Node]) -> list[str]:
    out = []
    for s in body:
        for n in X.walk(s):
            if n.type in ("return_statement", "goto_statement"):
                out.append(f"the body leaves early (line {n.start_point.row + 1})")
            elif n.type in ("break_statement", "continue_statement"):
                p, inner = n.parent, False
                while p is not None and p != s.parent:
                    inner = inner or p.type in (*ROW_LOOPS, "switch_statement")
                    p = p.parent
                if not inner:
                    out.append(f"a jump out of the body at line {n.start_point.row + 1}")
    return out


def _lanes(
    src: CudaSource, fn: ts.Node, index: str, index_type: str, body: list[ts.Node], refusals: list[str]
) -> Lanes:
    """The body's packable arrays, and the reasons its lanes are not independent."""
    pointers = _pointers(src, fn)
    refusals = list(refusals)
    text = "\n".join(src.text_of(s) for s in body)
    if _BARRIER.search(text) or COLLECTIVE.search(text):
        refusals.append("the body synchronizes or talks across lanes (barrier or warp collective)")
    if m := _THREAD_POSITION.search(text):
        refusals.append(f"the body reads the thread's position or shared state ({m.group(0)})")
    refusals += _jumps(body)
    written = set().union(*(X.assigned_names(s) for s in body)) if body else set()
    if index in written:
        refusals.append(f"the body writes the index {index}")
    exact: dict[str, list[tuple[ts.Node, str]]] = {}
    elsewhere: dict[str, list[ts.Node]] = {}
    for s in body:
        for n in X.walk(s):
            if n.type != "identifier" or n.text is None or n.text.decode() not in pointers:
                continue
            name, p = n.text.decode(), n.parent
            if p is not None and p.type == "subscript_expression" and p.child_by_field_name("argument") == n:
                base = _exact_base(src, _subscript_index(p), index, written)
                if base is not None and _address_taken(p):
                    refusals.append(
                        f"the address of {name}'s element is taken (line {n.start_point.row + 1}): "
                        "a packed copy would not alias it (an atomic or a callee writing through it)"
                    )
                if base is None:
                    elsewhere.setdefault(name, []).append(p)
                else:
                    exact.setdefault(name, []).append((p, base))
            else:
                refusals.append(
                    f"pointer {name} is used other than by subscript (line {n.start_point.row + 1})"
                )
    arrays = []
    for name, uses in exact.items():
        bases = {squash(b) for _, b in uses}
        subs = [u for u, _ in uses]
        writes = [u for u in subs if _write_of(u) is not None]
        if writes and (name in elsewhere or len(bases) > 1):
            refusals.append(
                f"{name} is written at [{uses[0][1] or index}] and also accessed at another index"
            )
            continue
        if len(bases) > 1:
            continue  # read at two offsets: scalar reads
        # a compound update (`y[i] /= s`, `y[i]++`) reads the element too
        reads = [u for u in subs if (w := _write_of(u)) is None or not _plain(src, w)]
        if writes and not _needs_load(src, reads, writes, body) and not _top_level_once(writes, body):
            refusals.append(f"{name} is not written exactly once on every path of the body")
            continue
        if pointers[name] not in ELEMENT_BYTES:
            if writes:
                refusals.append(f"{name} has an element type ({pointers[name]}) no pack carries")
            continue  # read-only arrays of other types stay scalar reads
        loaded = _needs_load(src, reads, writes, body)
        arrays.append(PackedArray(name, pointers[name], uses[0][1], loaded, bool(writes)))
    for name, subs in elsewhere.items():
        if any(_write_of(u) is not None for u in subs):
            refusals.append(f"{name} is written at an index other than {index}")
    if not arrays:
        refusals.append(f"no array is accessed at exactly [{index}] (or [base + {index}])")
    return Lanes(fn, index, index_type, body, arrays, refusals)


def _is_dispatch(src: CudaSource, node: ts.Node) -> bool:
    """An `if` testing that pointers are 16-byte aligned (code under it is already packed)."""
    cond = node.child_by_field_name("condition") if node.type == "if_statement" else None
    t = squash(src.text_of(cond)) if cond is not None else ""
    return bool(_INT_CAST.search(t) and _MODULO_ZERO.search(t))


def dispatch_fallback(src: CudaSource, node: ts.Node) -> ts.Node | None:
    """For an alignment dispatch, the code that runs on unaligned pointers: its `else` statement,
    or the dispatch itself when its branch ends in `return` (the fallback is what follows it)."""
    if not _is_dispatch(src, node):
        return None
    alt = node.child_by_field_name("alternative")
    if alt is not None:
        return alt.named_children[-1] if alt.type == "else_clause" and alt.named_children else alt
    then = node.child_by_field_name("consequence")
    stmts = statements(then) if then is not None else []
    return node if stmts and stmts[-1].type == "return_statement" else None


def remove_dispatch(src: CudaSource, node: ts.Node) -> CudaSource:
    """The alignment dispatch replaced by its fallback (the code every alignment can run)."""
    fallback = dispatch_fallback(src, node)
    if fallback is None:
        raise ValueError("not an alignment dispatch with a fallback")
    edits = []
    comment = node.prev_sibling
    while comment is not None and comment.type == "comment" and src.text_of(comment).startswith("//"):
        if src.text_of(comment).startswith("// KLineage vectorize:"):
            c: ts.Node | None = comment
            while c is not None and c != node:
                edits.append(edit.delete(src, c))
                c = c.next_sibling
            break
        comment = comment.prev_sibling
    if fallback == node:
        fn = X.enclosing_function(node)
        if fn is not None and node.parent == X.body_of(fn):
            edits += pack_grid.restore(src, fn)  # the per-thread form: its launches shrank the grid
        return edit.apply_edits(src, [*edits, edit.delete(src, node)])
    inner = statements(fallback)
    if fallback.type == "compound_statement" and len(inner) == 1:
        fallback = inner[0]
    ind_to = edit.indent_of(src, node)
    loops = ("for_statement", "while_statement", "do_statement")
    if fallback.type == "compound_statement" and len(inner) > 1 and all(s.type in loops for s in inner):
        # several loops under one dispatch (tile_packs' groups): the block's lines, braces gone (a
        # loop's names live in the loop; a block with declarations of its own keeps its braces)
        body = src.text_bytes[fallback.start_byte + 1 : fallback.end_byte - 1].decode()
        lines = body.strip("\n").rstrip().splitlines()
        ind_from = lines[0][: len(lines[0]) - len(lines[0].lstrip())]
        text = "\n".join(edit.reindent(lines, ind_from, ind_to))
        return edit.apply_edits(src, [*edits, edit.replace(node, text[len(ind_to) :])])
    ind_from = edit.indent_of(src, fallback)
    lines = src.text_of(fallback).splitlines()
    pragma = src.pragma_of(fallback) if fallback.type in loops else None
    if pragma is not None:  # the loop's own pragma (`#pragma unroll`) goes out with it
        lines = [pragma.text.strip(), ind_from + lines[0], *lines[1:]]
    text = "\n".join([lines[0], *edit.reindent(lines[1:], ind_from, ind_to)])
    return edit.apply_edits(src, [*edits, edit.replace(node, text)])


def dispatched(src: CudaSource, node: ts.Node, stop: ts.Node, *, after: bool = False) -> bool:
    """Whether `node` already sits under an alignment dispatch this module wrote (with `after`,
    also whether one precedes it in its block: the elementwise form leaves the bound check after it)."""
    if after and any(_is_dispatch(src, n) for n in _prev_siblings(node)):
        return True
    p = node.parent
    while p is not None and p != stop:
        if _is_dispatch(src, p):
            return True
        p = p.parent
    return False


def _prev_siblings(node: ts.Node) -> list[ts.Node]:
    out, sib = [], node.prev_named_sibling
    while sib is not None:
        out.append(sib)
        sib = sib.prev_named_sibling
    return out


def _register_arrays(fn: ts.Node) -> set[str]:
    """Names declared as arrays in `fn` (registers or shared memory, not global pointers)."""
    out = set()
    for d in (n for n in X.walk(fn) if n.type == "declaration"):
        for dec in d.children_by_field_name("declarator"):
            if any(n.type == "array_declarator" for n in X.walk(dec)):
                name, _, _ = X.declarator_name(
                    dec.child_by_field_name("declarator") if dec.type == "init_declarator" else dec
                )
                if name:
                    out.add(name)
    return out


def _bound_and_loop_refusals(
    src: CudaSource, fn: ts.Node, body: list[ts.Node], bound: str, why_loops: str
) -> list[str]:
    """Both shapes need a bound that every thread sees alike and the body leaves alone, and constant
    work per element (a loop in the body means more than an element per lane)."""
    out = []
    if T.thread_dependence(src, fn, bound) != "none":
        out.append(f"the bound {squash(bound)} varies across threads")
    written = set().union(*(X.assigned_names(b) for b in body)) if body else set()
    if written & set(re.findall(r"[A-Za-z_]\w*", bound)):
        out.append(f"the body writes the bound {squash(bound)}")
    loops = [n for b in body for n in X.walk(b) if n.type in ROW_LOOPS]
    if loops:
        out.append(f"the body loops (line {loops[0].start_point.row + 1}): {why_loops}")
    return out


# ---- one element per thread -------------------------------------------------------------------


def _index_decl(src: CudaSource, stmt: ts.Node) -> tuple[str, str] | None:
    """(name, type) when `stmt` declares one variable initialized to the global thread index."""
    if stmt.type != "declaration" or len(stmt.children_by_field_name("declarator")) != 1:
        return None
    d = stmt.child_by_field_name("declarator")
    ty = stmt.child_by_field_name("type")
    if d is None or ty is None or d.type != "init_declarator":
        return None
    name, value = d.child_by_field_name("declarator"), d.child_by_field_name("value")
    if name is None or value is None or name.type != "identifier":
        return None
    if T.global_tid(src.text_of(value)) != "blockDim.x":
        return None
    return src.text_of(name), _base_type(src.text_of(ty))


def _comparison(src: CudaSource, cond: ts.Node, index: str) -> tuple[str, str] | None:
    """(op, other side) with the index moved to the left, for `index op B` or `B op index`."""
    cond = unparenthesized(cond, clause=True)
    if cond.type != "binary_expression":
        return None
    op = src.text_of(cond.children[1])
    left, right = cond.child_by_field_name("left"), cond.child_by_field_name("right")
    if op not in _FLIP or left is None or right is None:
        return None
    if T.strip_casts(src.text_of(left)) == index and index not in X.identifiers(right):
        return op, src.text_of(right)
    if T.strip_casts(src.text_of(right)) == index and index not in X.identifiers(left):
        return _FLIP[op], src.text_of(left)
    return None


def _is_return(node: ts.Node) -> bool:
    return bool(statements(node)) and all(s.type == "return_statement" for s in statements(node))


def elementwise_kernels(src: CudaSource) -> list[ElementwiseKernel]:
    """Every kernel shaped `index; [uniform declarations]; bound check; body`, refused or not."""
    out = []
    for f in src.kernels:
        fn = src.node_for(f)
        body = X.body_of(fn)
        if body is None:
            continue
        stmts = statements(body)
        found = next(((k, d) for k, s in enumerate(stmts) if (d := _index_decl(src, s)) is not None), None)
        if found is None:
            continue
        at, (index, index_type) = found
        for k in range(at + 1, len(stmts)):
            s = stmts[k]
            if s.type != "if_statement" or s.child_by_field_name("alternative") is not None:
                continue
            cond, then = s.child_by_field_name("condition"), s.child_by_field_name("consequence")
            cmp = _comparison(src, cond, index) if cond is not None else None
            if cmp is None or then is None:
                continue
            op, bound = cmp
            if _is_return(then) and op in (">", ">="):
                lane_body = stmts[k + 1 :]
            elif op in ("<", "<=") and k == len(stmts) - 1 and not _is_return(then):
                lane_body = statements(then)
            else:
                continue
            if dispatched(src, s, fn, after=True):
                break
            refusals = []
            if any(index in X.identifiers(b) or b.type != "declaration" for b in stmts[at + 1 : k]):
                refusals.append(
                    "a statement between the index and its bound check is not a uniform declaration"
                )
            refusals += _bound_and_loop_refusals(
                src,
                fn,
                lane_body,
                bound,
                "a row or more per thread, which packing would serialize further (the row operators' case), "
                "not constant work per element",
            )
            lanes = _lanes(src, fn, index, index_type, lane_body, refusals)
            out.append(ElementwiseKernel(lanes, s, _UPPER[op], bound))
            break
    return out


# ---- row loops ----------------------------------------------------------------------------------


def _loop_header(src: CudaSource, loop: ts.Node) -> tuple[str, str, ts.Node, str, str] | None:
    """(index, type, start node, bound, step) of `for (T j = S; j < B; j += K | ++j | j++)`."""
    init = loop.child_by_field_name("initializer")
    cond, upd = loop.child_by_field_name("condition"), loop.child_by_field_name("update")
    if init is None or init.type != "declaration" or cond is None or upd is None:
        return None
    d, ty = init.child_by_field_name("declarator"), init.child_by_field_name("type")
    if d is None or ty is None or d.type != "init_declarator":
        return None
    name, start = d.child_by_field_name("declarator"), d.child_by_field_name("value")
    if name is None or start is None or name.type != "identifier":
        return None
    j = src.text_of(name)
    cmp = _comparison(src, cond, j)
    if cmp is None or cmp[0] != "<":
        return None
    u = squash(src.text_of(upd))
    if u in (f"++{j}", f"{j}++", f"{j}+=1"):
        step = "1"
    elif m := re.fullmatch(rf"{re.escape(j)}\+=(.+)", u):
        step = src.text_of(upd.child_by_field_name("right") or upd)
        if m.group(1) != squash(step):
            return None
    else:
        return None
    return j, _base_type(src.text_of(ty)), start, cmp[1], step


def _partitions(src: CudaSource, fn: ts.Node, start: str, step: str) -> bool:
    """Whether the threads' starts are exactly 0 .. step-1 (so they partition the range)."""
    s, k = squash(T.resolve_local(src, fn, start)), squash(T.resolve_local(src, fn, step))
    consts = file_constants(src)
    if s == "0" and k == "1":
        return True
    if T.strip_casts(s) == "threadIdx.x" and k == "blockDim.x":
        return True
    if (b := T.global_tid(s)) is not None and T.grid_stride(k) == b:
        return True
    m = re.fullmatch(r"\(?threadIdx\.x(%|&)\(?(\w+)(?:-1)?\)?\)?", T.strip_casts(s))
    kv = eval_int(k, consts)
    if m is None or kv is None or kv <= 0:
        return False
    v = eval_int(m.group(2), consts)
    if v is None:
        return False
    return (m.group(1) == "%" and v == kv) or (
        m.group(1) == "&" and (v == kv - 1 or (s.endswith("-1)") and v == kv)) and (kv & (kv - 1)) == 0
    )


def _carried_updates(src: CudaSource, loop: ts.Node, body: list[ts.Node]) -> list[str]:
    """Reasons a variable declared outside the loop is carried by other than a commutative update."""
    inner = set(X.declarations_in(loop))
    carried = set().union(*(written_names(s) for s in body)) - inner if body else set()
    out = []
    for v in sorted(carried):
        updates = [n for s in body for n in writes_to(s, v)]
        spans = [_branch_extremum(src, u, v) or u for u in updates]
        ok = bool(updates) and all(
            _commutative(src, u, v) or sp != u for u, sp in zip(updates, spans, strict=True)
        )
        reads = [
            n
            for s in body
            for n in X.walk(s)
            if n.type == "identifier"
            and n.text == v.encode()
            and not any(u.start_byte <= n.start_byte and n.end_byte <= u.end_byte for u in spans)
        ]
        if not ok or reads:
            out.append(
                f"{v} is carried across elements by other than a commutative update (+=, max, min) "
                "that nothing else reads: the packed loop changes which thread sees which element"
            )
    return out


def _branch_extremum(src: CudaSource, n: ts.Node, v: str) -> ts.Node | None:
    """The `if` of a max or min written as a branch (`if (e > v) v = e;`, `if (v < e) { v = e; }`)."""
    right = n.child_by_field_name("right")
    if not _plain(src, n) or right is None or v in X.identifiers(right) or X.has_side_effects(right):
        return None
    stmt = n.parent
    p = stmt.parent if stmt is not None else None
    if p is not None and p.type == "compound_statement" and len(statements(p)) == 1:
        p = p.parent
    if p is None or p.type != "if_statement" or p.child_by_field_name("alternative") is not None:
        return None
    cond = p.child_by_field_name("condition")
    cond = unparenthesized(cond, clause=True) if cond is not None else None
    if cond is None or cond.type != "binary_expression":
        return None
    a, b = cond.child_by_field_name("left"), cond.child_by_field_name("right")
    op, e = src.text_of(cond.children[1]), squash(src.text_of(right))
    if a is None or b is None or op not in _FLIP:
        return None
    sides = (squash(src.text_of(a)), squash(src.text_of(b)))
    return p if sides in ((e, v), (v, e)) else None


def _commutative(src: CudaSource, n: ts.Node, v: str) -> bool:
    if n.type != "assignment_expression":
        return False
    op = src.text_of(n.children[1])
    right = n.child_by_field_name("right")
    if right is None:
        return False
    if op in ("+=", "-=", "*="):
        return v not in X.identifiers(right)
    if op != "=":
        return False
    if right.type == "binary_expression" and src.text_of(right.children[1]) in ("+", "*"):
        a, b = right.child_by_field_name("left"), right.child_by_field_name("right")
        for x, y in ((a, b), (b, a)):
            if x is not None and y is not None and src.text_of(x) == v and v not in X.identifiers(y):
                return True
    if right.type == "call_expression" and _COMMUTATIVE_CALLS.fullmatch(X.callee_name(right)):
        args = X.call_args(right)
        names = [src.text_of(a) for a in args]
        return (
            len(args) == 2
            and names.count(v) == 1
            and all(v not in X.identifiers(a) for a in args if src.text_of(a) != v)
        )
    return False


def row_loops(src: CudaSource) -> list[RowLoop]:
    """Counting loops of kernels that partition a contiguous range among threads, refused or not."""
    out = []
    for f in src.kernels:
        fn = src.node_for(f)
        for loop in (n for n in X.walk(fn) if n.type == "for_statement"):
            head = _loop_header(src, loop)
            body_node = loop.child_by_field_name("body")
            if head is None or body_node is None or dispatched(src, loop, fn):
                continue
            j, jt, start, bound, step = head
            body = statements(body_node)
            refusals = []
            if not _partitions(src, fn, src.text_of(start), step):
                refusals.append(
                    f"the threads' starts ({squash(src.text_of(start))}, step {squash(step)}) are not a partition "
                    "of the range (0, threadIdx.x by blockDim.x, a lane by the warp, or a grid stride)"
                )
            refusals += _bound_and_loop_refusals(
                src,
                fn,
                body,
                bound,
                "an outer loop (rows per thread), where packs would hand each thread whole rows",
            )
            refusals += _carried_updates(src, loop, body)
            lanes = _lanes(src, fn, j, jt, body, refusals)
            if lanes.arrays:
                out.append(RowLoop(lanes, loop, src.text_of(start), step, bound))
    return out


# ---- facts and rewriting ------------------------------------------------------------------------


def facts(lanes: Lanes, shape: str) -> list[Precondition]:
    """The static facts the packed form rests on (recorded in skills as Layout facts)."""
    names = ", ".join(a.name for a in lanes.arrays) or "-"
    return [
        Precondition(
            "independent_lanes",
            not lanes.refusals,
            f"{shape}; lanes share nothing; {names} touched only at their element of {lanes.index}"
            if not lanes.refusals
            else "; ".join(lanes.refusals),
            "Layout",
        ),
        Precondition(
            "aligned_dispatch",
            True,
            "the packed path runs only when every packed pointer is 16-byte aligned (else the scalar one)",
            "Layout",
        ),
        Precondition("tail_covers_remainder", True, "elements past the last full pack run scalar", "Layout"),
    ]


def grid_fact(src: CudaSource, kern: ElementwiseKernel) -> Precondition:
    """Whether every launch can hand the packed threads ceil(G / W) blocks (pack_grid.py)."""
    why = pack_grid.refusals(src, kern.lanes.fn, [(a.name, a.base) for a in kern.lanes.arrays])
    return Precondition(
        "grid_shrinks",
        not why,
        f"every launch takes 1/{kern.lanes.width} of its blocks when the packed pointers are aligned"
        if not why
        else "; ".join(why),
        "Layout",
    )


def _fresh(taken: set[str], name: str) -> str:
    return fresh_numbered(taken, name, first=1)


class _Writer:
    """Names and text pieces shared by both packed forms."""

    def __init__(self, src: CudaSource, lanes: Lanes) -> None:
        self.src, self.lanes, self.w = src, lanes, lanes.width
        taken = X.identifiers(lanes.fn)
        self.first, self.lane = _fresh(taken, "kl_first"), _fresh(taken, "kl_k")
        self.pack = {a.name: _fresh(taken, f"kl_{a.name}") for a in lanes.arrays}
        self.view = {a.name: _fresh(taken, f"kl_{a.name}_lane") for a in lanes.arrays}

    def raw(self, a: PackedArray) -> str:
        nbytes = self.w * ELEMENT_BYTES[a.element]
        return (_FLOAT_RAW if a.element == "float" else _RAW)[nbytes]

    def aligned(self) -> str:
        ptrs = " | ".join(f"reinterpret_cast<unsigned long long>({a.origin})" for a in self.lanes.arrays)
        return f"(({ptrs}) % {PACK_BYTES}u) == 0"

    def loads(self) -> list[str]:
        out = []
        for a in self.lanes.arrays:
            r, e, at = self.raw(a), a.element, f"{a.origin} + {self.first}"
            if a.read:
                c = "" if a.written else "const "
                out.append(f"{c}{r} {self.pack[a.name]} = *reinterpret_cast<const {r}*>({at});")
            else:
                out.append(f"{r} {self.pack[a.name]};")
            c = "" if a.written else "const "
            out.append(f"{c}{e}* {self.view[a.name]} = reinterpret_cast<{c}{e}*>(&{self.pack[a.name]});")
        return out

    def stores(self) -> list[str]:
        return [
            f"*reinterpret_cast<{self.raw(a)}*>({a.origin} + {self.first}) = {self.pack[a.name]};"
            for a in self.lanes.arrays
            if a.written
        ]

    def body(self, rewrite: bool) -> list[str]:
        """The body's statements, element accesses of packed arrays rewritten to lane views."""
        src, lanes = self.src, self.lanes
        written = set().union(*(X.assigned_names(s) for s in lanes.body)) if lanes.body else set()

        def rw(n: ts.Node) -> str | None:
            loaded = _ldg_subscript(src, n)
            if loaded is not None:
                # `__ldg(&P[i])` on a packed element would be a read-only global load of the lane
                # view, a register: the device faults (not a global address). The pack was loaded
                # from global memory already, so the element is read from the view directly.
                return rw(loaded)
            if n.type != "subscript_expression":
                return None
            arg = n.child_by_field_name("argument")
            name = src.text_of(arg) if arg is not None else ""
            base = _exact_base(src, _subscript_index(n), lanes.index, written)
            a = next((a for a in lanes.arrays if a.name == name), None)
            if a is not None and base is not None and squash(base) == squash(a.base):
                return f"{self.view[name]}[{self.lane}]"
            return None

        out = []
        for s in lanes.body:
            text = X.render(src, s, rw) if rewrite else src.text_of(s)
            ind = edit.indent_of(src, s)
            out += edit.reindent(text.splitlines(), ind)
        return out

    def lane_loop(self) -> list[str]:
        """The body once per lane; the index is declared for the lane only where the body still reads it."""
        i, it = self.lanes.index, self.lanes.index_type
        body = self.body(True)
        uses = any(re.search(rf"(?<![\w.]){re.escape(i)}\b", ln) for ln in body)
        return [
            "#pragma unroll",
            f"for (int {self.lane} = 0; {self.lane} < {self.w}; ++{self.lane}) {{",
            *([f"    const {it} {i} = static_cast<{it}>({self.first} + {self.lane});"] if uses else []),
            *[f"    {s}" for s in body],
            "}",
        ]


def _ldg_subscript(src: CudaSource, n: ts.Node) -> ts.Node | None:
    """The subscript `P[i]` of a call `__ldg(&P[i])` (parentheses allowed), else None."""
    if n.type != "call_expression" or X.callee_name(n) != "__ldg" or len(args := X.call_args(n)) != 1:
        return None
    arg = unparenthesized(args[0])
    if arg.type != "pointer_expression" or arg.children[0].type != "&":
        return None
    inner = arg.child_by_field_name("argument")
    inner = unparenthesized(inner) if inner is not None else None
    return inner if inner is not None and inner.type == "subscript_expression" else None


def _indent(lines: list[str], by: str) -> list[str]:
    return [f"{by}{ln}" if ln.strip() else "" for ln in lines]


def apply_elementwise(src: CudaSource, kern: ElementwiseKernel) -> CudaSource:
    """The kernel with the packed path inserted before its bound check (the original path stays)."""
    lanes, wr = kern.lanes, _Writer(src, kern.lanes)
    w, first, lane, i, it = wr.w, wr.first, wr.lane, lanes.index, lanes.index_type

    def in_range(expr: str) -> str:
        return f"{expr} {kern.op} {X.wrap_text(kern.bound)}"

    lines = [
        f"// KLineage vectorize: {w} elements per thread in {PACK_BYTES}-byte packs when every packed pointer",
        "// is aligned; a scalar tail past the bound; unaligned pointers take the scalar path below.",
        f"if ({wr.aligned()}) {{",
        f"    const long long {first} = static_cast<long long>({i}) * {w};",
        f"    if ({in_range(f'{first} + {w - 1}')}) {{",
        *_indent(wr.loads() + wr.lane_loop() + wr.stores(), "        "),
        "    } else {",
        f"        for (int {lane} = 0; {lane} < {w} && {in_range(f'{first} + {lane}')}; ++{lane}) {{",
        f"            const {it} {i} = static_cast<{it}>({first} + {lane});",
        *_indent(wr.body(False), "            "),
        "        }",
        "    }",
        "    return;",
        "}",
    ]
    ind = edit.indent_of(src, kern.guard)
    grid = pack_grid.shrink(src, lanes.fn, [a.name for a in lanes.arrays], w)
    return edit.apply_edits(src, [edit.insert_before(kern.guard, f"\n{ind}".join(lines) + f"\n{ind}"), *grid])


def apply_row_loop(src: CudaSource, row: RowLoop) -> CudaSource:
    """The loop behind an alignment dispatch: packs partitioned like the elements were, then a
    scalar loop of the same shape over the elements after the last full pack."""
    wr = _Writer(src, row.lanes)
    w, first = wr.w, wr.first
    bound, step, start = X.wrap_text(row.bound), X.wrap_text(row.step), X.wrap_text(row.start)
    loop_text = src.text_of(row.loop)
    init = row.loop.child_by_field_name("initializer")
    d = init.child_by_field_name("declarator") if init is not None else None
    value = d.child_by_field_name("value") if d is not None else None
    assert value is not None
    a, b = value.start_byte - row.loop.start_byte, value.end_byte - row.loop.start_byte
    raw = src.text_bytes[row.loop.start_byte : row.loop.end_byte]
    stride = f"static_cast<long long>({step}) * {w}" if row.step.strip() != "1" else str(w)
    begin = f"static_cast<long long>({start}) * {w}" if row.start.strip() != "0" else "0"
    tail_start = f"{bound} / {w} * {w}" + (f" + {start}" if row.start.strip() != "0" else "")
    tail = (raw[:a] + tail_start.encode() + raw[b:]).decode()
    ind = edit.indent_of(src, row.loop)
    tail_lines = edit.reindent(tail.splitlines(), ind)
    orig_lines = edit.reindent(loop_text.splitlines(), ind)
    lines = [
        f"// KLineage vectorize: the row in {PACK_BYTES}-byte packs of {w} when every packed pointer is aligned,",
        "// partitioned among the threads like the elements were; the elements after the last pack run scalar.",
        f"if ({wr.aligned()}) {{",
        f"    for (long long {first} = {begin}; {first} + {w - 1} < {bound}; {first} += {stride}) {{",
        *_indent(wr.loads() + wr.lane_loop() + wr.stores(), "        "),
        "    }",
        *_indent(tail_lines, "    "),
        "} else {",
        *_indent(orig_lines, "    "),
        "}",
    ]
    return edit.apply_edits(src, [edit.replace(row.loop, f"\n{ind}".join(lines))])
