"""Forward vectorization of a one-thread-per-element kernel: each thread moves one 16-byte pack.

The naive elementwise idiom that other authors write is a global index, a bound check and a body
(`int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) y[i] = f(x[i]);`, or the early-return
spelling `if (i >= n) return; ...`). The vectorized form (what llm.c's `x128` and the experts do)
gives thread t the elements [t*W, t*W + W): every array accessed at exactly `[i]` is read or
written as one 16-byte pack (float4 for float, uint4 carrying 8 halves or bfloat16s, ...), and the
body runs once per lane with `i` bound to that lane's element. A pack straddling the end takes a
scalar tail (lanes up to the bound), and a pointer that is not pack-aligned sends every thread down
the original scalar path (the alignment dispatch), so odd lengths and offset pointers stay exact.
The launch is left alone: threads past the packed range return at once.

The preconditions are read on structure, not spelling: the index is the global thread index in
any order or cast, the bound check is an upper bound on it in either spelling, the lanes are
independent (no barrier, warp collective, thread-position read or pointer escaping), the work per
element is constant (no loop: a thread per row is the row operators' case), and an array written
at `[i]` is touched nowhere else.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import tree_sitter as ts

from klineage.deopt import _cexpr as X
from klineage.deopt import _threads as T
from klineage.deopt.base import Precondition
from klineage.deopt.rows import COLLECTIVE
from klineage.deopt.rows import LOOPS as ROW_LOOPS
from klineage.source import edit
from klineage.source.model import CudaSource
from klineage.source.syntax import squash

PACK_BYTES = 16
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


@dataclass(frozen=True)
class PackedArray:
    """A pointer parameter accessed only at `[i]`: its element type and whether the body reads/writes it."""

    name: str
    element: str
    read: bool
    written: bool


@dataclass(frozen=True)
class ElementwiseKernel:
    """The parts of a one-thread-per-element kernel the forward step needs, with any refusals."""

    fn: ts.Node
    index: str
    index_type: str
    guard: ts.Node
    #: the in-range test as (op, bound): the element `i` exists when `i op bound`
    op: str
    bound: str
    body: list[ts.Node]
    arrays: list[PackedArray]
    refusals: list[str]

    @property
    def width(self) -> int:
        return PACK_BYTES // max(ELEMENT_BYTES[a.element] for a in self.arrays) if self.arrays else 0


def _base_type(type_text: str) -> str:
    t = re.sub(r"\b(const|volatile|__restrict__|__restrict|restrict)\b|\*", " ", type_text)
    return " ".join(t.split())


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
    while cond.type in ("parenthesized_expression", "condition_clause") and cond.named_children:
        cond = cond.named_children[-1]
    if cond.type != "binary_expression":
        return None
    op = src.text_of(cond.children[1])
    left, right = cond.child_by_field_name("left"), cond.child_by_field_name("right")
    if op not in _FLIP or left is None or right is None:
        return None
    strip = T.strip_casts
    if strip(src.text_of(left)) == index and index not in X.identifiers(right):
        return op, src.text_of(right)
    if strip(src.text_of(right)) == index and index not in X.identifiers(left):
        return _FLIP[op], src.text_of(left)
    return None


def _statements(node: ts.Node) -> list[ts.Node]:
    if node.type == "compound_statement":
        return [c for c in node.named_children if c.type != "comment"]
    return [node]


def _is_return(node: ts.Node) -> bool:
    return bool(_statements(node)) and all(s.type == "return_statement" for s in _statements(node))


def elementwise_kernels(src: CudaSource) -> list[ElementwiseKernel]:
    """Every kernel shaped `index; [uniform declarations]; bound check; body`, refused or not."""
    out = []
    for f in src.kernels:
        fn = src.node_for(f)
        body = X.body_of(fn)
        if body is None:
            continue
        stmts = _statements(body)
        for at, stmt in enumerate(stmts):  # noqa: B007 - `at` is read after the loop
            found = _index_decl(src, stmt)
            if found is not None:
                break
        else:
            continue
        index, index_type = found
        refusals = []
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
                lane_body = _statements(then)
            else:
                continue
            between = stmts[at + 1 : k]
            if any(index in X.identifiers(b) or b.type != "declaration" for b in between):
                refusals.append(
                    "a statement between the index and its bound check is not a uniform declaration"
                )
            kern = ElementwiseKernel(fn, index, index_type, s, _UPPER[op], bound, lane_body, [], refusals)
            out.append(_with_arrays(src, f, kern))
            break
    return out


def _with_arrays(src: CudaSource, f, kern: ElementwiseKernel) -> ElementwiseKernel:  # noqa: ANN001
    """`kern` with its packable arrays and the reasons the lanes are not independent."""
    i = kern.index
    pointers = {p.name: _base_type(p.type) for p in f.params if p.is_pointer}
    refusals = list(kern.refusals)
    text = "\n".join(src.text_of(s) for s in kern.body)
    if _BARRIER.search(text) or COLLECTIVE.search(text):
        refusals.append("the body synchronizes or talks across lanes (barrier or warp collective)")
    if m := _THREAD_POSITION.search(text):
        refusals.append(f"the body reads the thread's position or shared state ({m.group(0)})")
    if T.thread_dependence(src, kern.fn, kern.bound) != "none":
        refusals.append(f"the bound {squash(kern.bound)} varies across threads")
    loops = [n for s in kern.body for n in X.walk(s) if n.type in ROW_LOOPS]
    if loops:
        refusals.append(
            f"the body loops (line {loops[0].start_point.row + 1}): a row or more per thread, which packing "
            "would serialize further (the row operators' case), not constant work per element"
        )
    for s in kern.body:
        for n in X.walk(s):
            if n.type in ("return_statement", "goto_statement"):
                refusals.append(f"the body leaves the kernel early (line {n.start_point.row + 1})")
            elif n.type in ("break_statement", "continue_statement") and not any(
                a.type in ("for_statement", "while_statement", "do_statement", "switch_statement")
                for a in _ancestors_within(n, s)
            ):
                refusals.append(f"a jump out of the body at line {n.start_point.row + 1}")
    written_whole = set().union(*(X.assigned_names(s) for s in kern.body)) if kern.body else set()
    if i in written_whole or kern.bound.strip() in written_whole:
        refusals.append(f"the body writes the index {i} or the bound")
    at_i: dict[str, list[ts.Node]] = {}
    elsewhere: dict[str, list[ts.Node]] = {}
    for s in kern.body:
        for n in X.walk(s):
            if n.type != "identifier" or n.text is None or n.text.decode() not in pointers:
                continue
            name, p = n.text.decode(), n.parent
            if p is not None and p.type == "subscript_expression" and p.child_by_field_name("argument") == n:
                idx = next((c for c in p.children if c.type == "subscript_argument_list"), None)
                inner = idx.named_children[0] if idx is not None and idx.named_children else None
                exact = inner is not None and T.strip_casts(src.text_of(inner)) == i
                (at_i if exact else elsewhere).setdefault(name, []).append(p)
            else:
                refusals.append(
                    f"pointer {name} is used other than by subscript (line {n.start_point.row + 1})"
                )
    arrays = []
    for name, uses in at_i.items():
        writes = [u for u in uses if _write_of(u) is not None]
        reads = [u for u in uses if _write_of(u) is None]
        if writes and name in elsewhere:
            refusals.append(f"{name} is written at [{i}] and also accessed at another index")
            continue
        if any(src.text_of(_write_of(w).children[1]) != "=" for w in writes):  # type: ignore[union-attr]
            refusals.append(f"{name}[{i}] takes a compound assignment")
            continue
        if writes and not reads and not _written_once_on_every_path(writes, kern.body):
            refusals.append(f"{name}[{i}] is not written exactly once on every path of the body")
            continue
        if pointers[name] not in ELEMENT_BYTES:
            if writes:
                refusals.append(f"{name} has an element type ({pointers[name]}) no pack carries")
            continue  # read-only arrays of other types stay scalar reads
        arrays.append(PackedArray(name, pointers[name], bool(reads), bool(writes)))
    for name, uses in elsewhere.items():
        if any(_write_of(u) is not None for u in uses):
            refusals.append(f"{name} is written at an index other than {i}")
    if not arrays:
        refusals.append(f"no array is accessed at exactly [{i}]")
    return ElementwiseKernel(
        kern.fn, i, kern.index_type, kern.guard, kern.op, kern.bound, kern.body, arrays, refusals
    )


def _ancestors_within(n: ts.Node, top: ts.Node) -> list[ts.Node]:
    out, p = [], n.parent
    while p is not None and p != top.parent:
        out.append(p)
        p = p.parent
    return out


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


def _written_once_on_every_path(writes: list[ts.Node], body: list[ts.Node]) -> bool:
    """One write, as a statement of the body's top level (so every lane of a pack is stored)."""
    if len(writes) != 1:
        return False
    stmt = writes[0].parent
    while stmt is not None and stmt.type != "expression_statement":
        stmt = stmt.parent
    return stmt is not None and any(stmt == b for b in body)


def facts(kern: ElementwiseKernel) -> list[Precondition]:
    """The static facts the packed form rests on (recorded in skills as Layout facts)."""
    names = ", ".join(a.name for a in kern.arrays) or "-"
    return [
        Precondition(
            "independent_lanes",
            not kern.refusals,
            f"one element per thread at {kern.index}; lanes share nothing; {names} touched only at [{kern.index}]"
            if not kern.refusals
            else "; ".join(kern.refusals),
            "Layout",
        ),
        Precondition(
            "aligned_dispatch",
            True,
            "the packed path runs only when every packed pointer is 16-byte aligned (else the scalar one)",
            "Layout",
        ),
        Precondition(
            "tail_covers_remainder", True, "lanes past the bound are skipped by a scalar tail", "Layout"
        ),
    ]


def _fresh(taken: set[str], name: str) -> str:
    out, k = name, 1
    while out in taken:
        out, k = f"{name}{k}", k + 1
    taken.add(out)
    return out


def packed_text(src: CudaSource, kern: ElementwiseKernel) -> str:
    """The dispatch + packed path + scalar tail, to be inserted before the bound check."""
    w = kern.width
    taken = X.identifiers(kern.fn)
    first, lane = _fresh(taken, "kl_first"), _fresh(taken, "kl_k")
    pack = {a.name: _fresh(taken, f"kl_{a.name}") for a in kern.arrays}
    view = {a.name: _fresh(taken, f"kl_{a.name}_lane") for a in kern.arrays}
    ind = edit.indent_of(src, kern.guard)
    i, it = kern.index, kern.index_type

    def raw(a: PackedArray) -> str:
        nbytes = w * ELEMENT_BYTES[a.element]
        return (_FLOAT_RAW if a.element == "float" else _RAW)[nbytes]

    def in_range(expr: str) -> str:
        return f"{expr} {kern.op} {X.wrap_text(kern.bound)}"

    def body(rewrite: bool) -> list[str]:
        def rw(n: ts.Node) -> str | None:
            if n.type != "subscript_expression":
                return None
            base = n.child_by_field_name("argument")
            name = src.text_of(base) if base is not None else ""
            idx = next((c for c in n.children if c.type == "subscript_argument_list"), None)
            inner = idx.named_children[0] if idx is not None and idx.named_children else None
            if name in view and inner is not None and T.strip_casts(src.text_of(inner)) == i:
                return f"{view[name]}[{lane}]"
            return None

        out = []
        for s in kern.body:
            text = X.render(src, s, rw) if rewrite else src.text_of(s)
            out += [f"    {line}" if line.strip() else "" for line in _dedent(text, src, s).splitlines()]
        return out

    aligned = " | ".join(f"reinterpret_cast<unsigned long long>({a.name})" for a in kern.arrays)
    lines = [
        f"// KLineage vectorize: {w} elements per thread in {PACK_BYTES}-byte packs when every packed pointer",
        "// is aligned; a scalar tail past the bound; unaligned pointers take the scalar path below.",
        f"if ((({aligned}) % {PACK_BYTES}u) == 0) {{",
        f"    const long long {first} = static_cast<long long>({i}) * {w};",
        f"    if ({in_range(f'{first} + {w - 1}')}) {{",
    ]
    for a in kern.arrays:
        r, e = raw(a), a.element
        if a.read:
            lines.append(
                f"        {'' if a.written else 'const '}{r} {pack[a.name]} = "
                f"*reinterpret_cast<const {r}*>({a.name} + {first});"
            )
        else:
            lines.append(f"        {r} {pack[a.name]};")
        const = "" if a.written else "const "
        lines.append(f"        {const}{e}* {view[a.name]} = reinterpret_cast<{const}{e}*>(&{pack[a.name]});")
    lines += [
        "        #pragma unroll",
        f"        for (int {lane} = 0; {lane} < {w}; ++{lane}) {{",
        f"            const {it} {i} = static_cast<{it}>({first} + {lane});",
        *[f"        {s}" if s else "" for s in body(True)],
        "        }",
    ]
    lines += [
        f"        *reinterpret_cast<{raw(a)}*>({a.name} + {first}) = {pack[a.name]};"
        for a in kern.arrays
        if a.written
    ]
    lines += [
        "    } else {",
        f"        for (int {lane} = 0; {lane} < {w} && {in_range(f'{first} + {lane}')}; ++{lane}) {{",
        f"            const {it} {i} = static_cast<{it}>({first} + {lane});",
        *[f"        {s}" if s else "" for s in body(False)],
        "        }",
        "    }",
        "    return;",
        "}",
    ]
    return f"\n{ind}".join(lines) + f"\n{ind}"


def _dedent(text: str, src: CudaSource, node: ts.Node) -> str:
    """`text` of a statement with its source indentation removed from continuation lines."""
    ind = edit.indent_of(src, node)
    return "\n".join(ln[len(ind) :] if ln.startswith(ind) else ln for ln in text.splitlines())


def apply(src: CudaSource, kern: ElementwiseKernel) -> CudaSource:
    """The kernel with the packed path inserted before its bound check (the original path stays)."""
    return edit.apply_edits(src, [edit.insert_before(kern.guard, packed_text(src, kern))])
