"""16-byte global loads for a block's shared-memory tile staging loop (any author's spelling of it).

The site is the loop a block uses to copy a tile of a global float array into shared memory, one
element per trip, the tile's element walked in a flat index `e` split into a row `r = e / C` and a
column `c = e % C`:

    for (int e = tid; e < R * C; e += NT) {
        const int r = e / C, c = e % C;
        ...declarations reading r and c...
        tile[..r..][..c..] = (in_bounds) ? convert(P[index]) : zero;   // or without the guard
    }

The forward step keeps that loop as the fallback of an alignment dispatch and adds a loop over
packs of four columns. Nothing is assumed about `index`: each of a pack's four lanes evaluates the
loop's own declarations, guard and address (a lambda over `c`), and the pack is read as one
`float4` only when the four addresses are in bounds, consecutive and 16-byte aligned; any other
pack reads its lanes one by one exactly as the loop did. So the step is sound for any layout, and
fast where the tile's columns are contiguous in memory (nvcc folds the contiguity test when the
index is affine in `c`). Removal is vectorize's `aligned_dispatch` removal: the fallback stays.

Where the loop's structure proves more, the test moves out of the loop (the whole-tile form): the
declarations, guard and index read as polynomials in r and c (over names the loop does not write)
show that the index steps by exactly one along c and is affine in r, and that the guard is a
conjunction of comparisons each linear in one of r, c (so each holds over the whole tile when it
holds at both ends). Then one test a tile (the guard at (0, 0) and (R-1, C-1), the first address
16-byte aligned, the row stride read off the index's polynomial a multiple of four) picks a loop
of plain float4 loads; the per-pack lanes and their checks are gone. The reading assumes the
loop's integer arithmetic does not wrap inside one tile (a kernel whose index wraps reads wrong
elements as written already). Whole-tile loops that follow one another in a block (a GEMM's A and
B tiles) go under one dispatch: every tile's test in one condition, the packed loops under it, the
loops as written in its `else` (`tile_groups`; the removal writes the loops back). Measured on the
H100 (RESULTS, eighteenth to twentieth sessions): on the sgemm leave-one-out kernel the per-pack
test costs more than the packs save; the whole-tile form pays only under a register cap
(launch_bounds' minBlocks step): 4.45 ms with a dispatch a tile, 4.24 ms with one for both, the
cap alone 4.44.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

import tree_sitter as ts

from klineage.deopt import _cexpr as X
from klineage.deopt import packs as pack
from klineage.deopt import poly as P
from klineage.source import edit
from klineage.source.model import CudaSource
from klineage.source.syntax import fresh_numbered, squash, unparenthesized

_ZERO = re.compile(
    r"^(?:static_cast<\w+>\(0(?:\.0*f?)?\)|\(\w+\)\s*0(?:\.0*f?)?|0(?:\.0*)?f?|\w+\(0(?:\.0*f?)?\))$"
)


#: calls a staged value may go through (a conversion of the loaded element, the read-only path)
_PURE_CALLS = {"static_cast", "static_cast<float>", "__ldg", "float"}


@dataclass(frozen=True)
class TileLoad:
    """A staging loop whose tile columns can be read in packs of four."""

    loop: ts.Node
    function: str
    flat: str  # the flat index `e`
    start: str  # its first value
    step: str  # its stride
    rows: str  # R in `e < R * C`
    cols: str  # C
    row_var: str
    col_var: str
    row_type: str
    col_type: str
    decls: tuple[str, ...]  # the body's declarations after r and c (text)
    store: str  # the tile element written, as text (reads r and c only)
    guard: str | None  # the condition under which the element is loaded
    zero: str  # the value stored otherwise
    pointer: str  # the global array read
    address: str  # `&P[index]` as text
    convert: tuple[str, str]  # text before and after the loaded value in the stored expression
    row_stride: str | None = None  # elements between rows, as C text, where a once-a-tile test is sound

    @property
    def whole_tile(self) -> bool:
        """Whether the structure proves the once-a-tile test sound (module doc)."""
        return self.row_stride is not None


def _shared_names(fn: ts.Node) -> set[str]:
    out = set()
    for d in X.walk(fn):
        if d.type == "declaration" and "__shared__" in d.text.decode().split("[")[0]:
            for c in d.children_by_field_name("declarator"):
                nm, _, _ = X.declarator_name(
                    c.child_by_field_name("declarator") if c.type == "init_declarator" else c
                )
                if nm:
                    out.add(nm)
    return out


def _row_col(src: CudaSource, stmts: list[ts.Node], flat: str) -> tuple[dict[str, tuple[str, str, str]], int]:
    """name -> (op, divisor text, type) for the leading declarations `x = e / C` and `y = e % C`,
    and how many statements they take."""
    found: dict[str, tuple[str, str, str]] = {}
    used = 0
    for stmt in stmts:
        if stmt.type != "declaration" or len(found) >= 2:
            break
        t = stmt.child_by_field_name("type")
        typ = " ".join(
            [src.text_of(c) for c in stmt.children if c.type == "type_qualifier"]
            + ([src.text_of(t)] if t is not None else [])
        )
        got = []
        for d in stmt.children_by_field_name("declarator"):
            value = d.child_by_field_name("value") if d.type == "init_declarator" else None
            name = d.child_by_field_name("declarator") if value is not None else None
            if value is None or name is None or name.type != "identifier":
                return {}, 0
            m = re.fullmatch(rf"\(?{re.escape(flat)}\)?([/%])(.+)", squash(src.text_of(value)))
            if m is None:
                return {}, 0
            got.append((src.text_of(name), (m.group(1), m.group(2), typ)))
        found.update(got)
        used += 1
    return found, used


def _global_read(src: CudaSource, expr: ts.Node, pointers: dict[str, str]) -> tuple[ts.Node, str] | None:
    """The one subscript of a global float pointer in `expr` (possibly under casts), if it is the
    only memory read there."""
    subs = [n for n in X.walk(expr) if n.type == "subscript_expression"]
    calls = [n for n in X.walk(expr) if n.type == "call_expression" and X.callee_name(n) not in _PURE_CALLS]
    if len(subs) != 1 or calls:
        return None
    base = subs[0].child_by_field_name("argument")
    name = src.text_of(base) if base is not None else ""
    if pointers.get(name) != "float":  # four to a float4
        return None
    return subs[0], name


def _pointer_params(src: CudaSource, fn: ts.Node) -> dict[str, str]:
    """The kernel's pointer parameters -> element type (global memory, as launched)."""
    out = {}
    decl = fn.child_by_field_name("declarator")
    params = decl.child_by_field_name("parameters") if decl is not None else None
    for p in params.named_children if params is not None else []:
        if p.type != "parameter_declaration":
            continue
        t = p.child_by_field_name("type")
        nm, ptr, _ = X.declarator_name(p.child_by_field_name("declarator"))
        if nm and ptr and t is not None and "*" in src.text_of(p).replace("__restrict__", ""):
            out[nm] = src.text_of(t).strip()
    return out


def _analyze(
    src: CudaSource, fn: ts.Node, loop: ts.Node, shared: set[str], pointers: dict[str, str]
) -> TileLoad | None:
    """The staging loop `loop` of `fn` read as a TileLoad (`shared`: fn's shared arrays,
    `pointers`: its pointer parameters, both read once per function), None when it is not one."""
    init = loop.child_by_field_name("initializer")
    cond = loop.child_by_field_name("condition")
    update = loop.child_by_field_name("update")
    body = loop.child_by_field_name("body")
    if init is None or cond is None or update is None or body is None or body.type != "compound_statement":
        return None
    decl = init.child_by_field_name("declarator") if init.type == "declaration" else None
    value_node = (
        decl.child_by_field_name("value") if decl is not None and decl.type == "init_declarator" else None
    )
    t_node = init.child_by_field_name("type")
    if value_node is None or t_node is None or squash(src.text_of(t_node)) != "int":
        return None
    flat, start = src.text_of(decl.child_by_field_name("declarator")), src.text_of(value_node)
    if (
        update.type != "assignment_expression"
        or squash(src.text_of(update.child_by_field_name("left"))) != flat
        or src.text_of(next(ch for ch in update.children if not ch.is_named)) != "+="
        or cond.type != "binary_expression"
        or squash(src.text_of(cond.child_by_field_name("left"))) != flat
        or src.text_of(next(ch for ch in cond.children if not ch.is_named)) != "<"
    ):
        return None
    step = src.text_of(update.child_by_field_name("right"))
    stmts = pack.statements(body)
    rc, used = _row_col(src, stmts, flat)
    divs = {op: (name, div, typ) for name, (op, div, typ) in rc.items()}
    if set(divs) != {"/", "%"} or divs["/"][1] != divs["%"][1]:
        return None
    cols = divs["%"][1]
    ext = unparenthesized(cond.child_by_field_name("right"))
    rows = None
    if (
        ext.type == "binary_expression"
        and src.text_of(next(ch for ch in ext.children if not ch.is_named)) == "*"
    ):
        a, b = ext.child_by_field_name("left"), ext.child_by_field_name("right")
        if squash(src.text_of(b)) == cols:
            rows = src.text_of(a)
        elif squash(src.text_of(a)) == cols:
            rows = src.text_of(b)
    if rows is None:
        return None
    rest = stmts[used:]
    if not rest or rest[-1].type != "expression_statement":
        return None
    decls, last = rest[:-1], rest[-1]
    if any(d.type != "declaration" or X.has_side_effects(d) for d in decls):
        return None
    asg = last.named_children[0] if last.named_children else None
    if asg is None or asg.type != "assignment_expression":
        return None
    op = next((ch for ch in asg.children if not ch.is_named), None)
    left, right = asg.child_by_field_name("left"), asg.child_by_field_name("right")
    if op is None or src.text_of(op) != "=" or left is None or right is None:
        return None
    # the tile element: a shared array indexed by r, c and names from outside the loop
    base = X.pointer_base(left)
    row_var, col_var = divs["/"][0], divs["%"][0]
    local = set(X.declarations_in(body))
    if (
        left.type != "subscript_expression"
        or base is None
        or src.text_of(base) not in shared
        or (X.identifiers(left) & local) - {row_var, col_var}
        or col_var not in X.identifiers(left)
    ):
        return None
    guard, zero, value, guard_node = None, "", right, None
    if right.type == "conditional_expression":
        g, v, z = (right.child_by_field_name(f) for f in ("condition", "consequence", "alternative"))
        guard_node = g
        if g is None or v is None or z is None or not _ZERO.match(squash(src.text_of(z))):
            return None
        guard, zero, value = src.text_of(g), src.text_of(z), v
        if any(n.type in ("subscript_expression", "call_expression") for n in X.walk(g)):
            return None  # a guard that reads memory or calls is not re-evaluated per lane
    if X.has_side_effects(right):
        return None
    read = _global_read(src, value, pointers)
    if read is None:
        return None
    sub, pointer = read
    index = sub.child_by_field_name("index") or next(
        (ch for ch in sub.named_children if ch != sub.child_by_field_name("argument")), None
    )
    if index is None:
        return None
    idx_text = src.text_of(index).strip("[] ")
    vt = src.text_of(value)
    lo, hi = sub.start_byte - value.start_byte, sub.end_byte - value.start_byte
    vb = vt.encode()
    return TileLoad(
        loop=loop,
        function=X.N.func_name(fn),
        flat=flat,
        start=start,
        step=step,
        rows=rows,
        cols=cols,
        row_var=row_var,
        col_var=col_var,
        row_type=divs["/"][2],
        col_type=divs["%"][2],
        decls=tuple(src.text_of(d) for d in decls),
        store=src.text_of(left),
        guard=guard,
        zero=zero,
        pointer=pointer,
        address=f"&{pointer}[{idx_text}]",
        convert=(vb[:lo].decode(), vb[hi:].decode()),
        row_stride=_whole_tile(src, decls, guard_node, index, row_var, col_var, local, flat),
    )


_ROW, _COL = "@r", "@c"  # the tile's row and column in the polynomials (not C identifiers)
_COMPARISONS = frozenset({"<", "<=", ">", ">="})  # the ordered ones: monotone when linear


class _Affine:
    """Reads integer expressions of a staging loop's body into polynomials in the tile's row and
    column (`_ROW`, `_COL`) and the names the loop does not write; None for anything else (a
    division, a call other than a cast, memory, a name the loop writes)."""

    def __init__(self, src: CudaSource, row_var: str, col_var: str, local: set[str], flat: str) -> None:
        self.src = src
        self.env: dict[str, P.Poly | None] = {row_var: P.var(_ROW), col_var: P.var(_COL)}
        self.opaque = (local | {flat}) - {row_var, col_var}

    def declare(self, decl: ts.Node) -> None:
        t = decl.child_by_field_name("type")
        integer = t is not None and P.is_int_type(self.src.text_of(t))
        for d in decl.children_by_field_name("declarator"):
            value = d.child_by_field_name("value") if d.type == "init_declarator" else None
            name = d.child_by_field_name("declarator") if value is not None else None
            if name is not None and name.type == "identifier":
                self.env[self.src.text_of(name)] = (
                    self.value(value) if integer and value is not None else None
                )

    def value(self, n: ts.Node) -> P.Poly | None:
        """`n`'s polynomial (`poly.from_c` of its text; the names the loop writes are not read)."""
        scope: dict[str, P.Poly | None] = {name: None for name in self.opaque}
        return P.from_c(self.src.text_of(n), {**scope, **self.env})

    def atoms(self, n: ts.Node, negated: bool = False) -> list[P.Poly] | None:
        """`n` as a conjunction of comparisons, each as `left - right` (the sign is not needed:
        a comparison linear in one variable holds on an interval's ends only if it holds on all
        of it); None when `n` is not one."""
        n = unparenthesized(n)
        if n.type == "unary_expression" and self.src.text_of(n.children[0]) == "!":
            return self.atoms(n.child_by_field_name("argument"), not negated)
        if n.type != "binary_expression":
            return None
        op = self.src.text_of(n.children[1])
        if op == ("||" if negated else "&&"):
            a = self.atoms(n.child_by_field_name("left"), negated)
            b = self.atoms(n.child_by_field_name("right"), negated)
            return None if a is None or b is None else a + b
        if op not in _COMPARISONS:
            return None
        a, b = self.value(n.child_by_field_name("left")), self.value(n.child_by_field_name("right"))
        return None if a is None or b is None else [P.add(a, b, -1)]


def _monotone(p: P.Poly) -> bool:
    """Linear in at most one of the tile's row and column (so monotone along the tile)."""
    used = {v for k in p for v in k if v in (_ROW, _COL)}
    return len(used) <= 1 and all(P.degree_in(p, v) == 1 for v in used)


def _whole_tile(
    src: CudaSource,
    decls: list[ts.Node],
    guard: ts.Node | None,
    index: ts.Node,
    row_var: str,
    col_var: str,
    local: set[str],
    flat: str,
) -> str | None:
    """The index's row stride (C text) when the once-a-tile test is sound for this loop (module
    doc): the index steps by one along the column and is affine in the row, the guard a
    conjunction of monotone comparisons; None otherwise."""
    if index.type == "subscript_argument_list" and len(index.named_children) == 1:
        index = index.named_children[0]
    a = _Affine(src, row_var, col_var, local, flat)
    for d in decls:
        a.declare(d)
    idx = a.value(index)
    if idx is None or P.part_with(idx, _COL) != {(_COL,): 1} or P.degree_in(idx, _ROW) > 1:
        return None
    atoms = a.atoms(guard) if guard is not None else []
    if atoms is None or not all(_monotone(p) for p in atoms):
        return None
    return P.c_text(P.coefficient(idx, _ROW))


def tile_loads(src: CudaSource) -> tuple[TileLoad, ...]:
    """Every staging loop of a kernel that can take packed loads (not already under a dispatch).
    Not memoized per text: the answer holds nodes of this parse, and the materializer parses the
    same text again (a memo would hand it another tree's nodes)."""
    out = []
    for fn in X.code_functions(src):
        shared, pointers = _shared_names(fn), _pointer_params(src, fn)
        for loop in X.walk(fn):
            if loop.type != "for_statement" or pack.dispatched(src, loop, fn):
                continue
            t = _analyze(src, fn, loop, shared, pointers)
            if t is not None:
                out.append(t)
    return tuple(out)


def tile_groups(src: CudaSource) -> tuple[tuple[TileLoad, ...], ...]:
    """The staging loops as the forward step takes them: whole-tile loops that follow one another
    in a block (a GEMM's A and B tiles of one K step) share one dispatch, every other loop is
    alone. Measured on the H100 (call Q, twentieth session): the sgemm leave-one-out kernel with
    both tiles' tests in one dispatch 4.24 ms against 4.45 ms with a dispatch a tile."""
    groups: list[list[TileLoad]] = []
    for t in tile_loads(src):
        last = groups[-1][-1] if groups else None
        if last is not None and last.whole_tile and t.whole_tile and _next_to(src, last.loop, t.loop):
            groups[-1].append(t)
        else:
            groups.append([t])
    return tuple(tuple(g) for g in groups)


def _next_to(src: CudaSource, a: ts.Node, b: ts.Node) -> bool:
    """Whether loop `b` follows loop `a` in the same block with nothing between them but a line
    break, the same indentation and `b`'s own pragma (what the dispatch's removal writes back)."""
    if a.parent is None or a.parent != b.parent:
        return False
    ind = edit.indent_of(src, a)
    pragma = src.pragma_of(b)
    between = src.text_bytes[a.end_byte : b.start_byte].decode()
    if pragma is None:
        return between == "\n" + ind
    head, _, rest = between.partition("\n")
    line, _, tail = rest.partition("\n")
    return head == "" and line == ind + pragma.text.strip() and tail == ind


def _substitute(text: str, names: dict[str, str]) -> str:
    return re.sub(r"\b(" + "|".join(map(re.escape, names)) + r")\b", lambda m: names[m.group(1)], text)


def apply(src: CudaSource, t: TileLoad) -> CudaSource:
    """The staging loop behind an alignment dispatch, packed loads first (see the module doc): the
    whole-tile form where the loop's structure proves it sound, else the per-pack form."""
    return apply_group(src, (t,))


def apply_group(src: CudaSource, group: tuple[TileLoad, ...]) -> CudaSource:
    """A group of `tile_groups` behind one alignment dispatch: every tile's once-a-tile test in
    one condition, all packed loops under it, the loops as they were in its `else`."""
    if len(group) == 1 and not group[0].whole_tile:
        return _apply_per_pack(src, group[0])
    fresh = _fresh_names(group[0])
    parts = [_whole_parts(t, fresh) for t in group]
    comment = [
        "// KLineage vectorize: the tile in 16-byte packs of four floats when all of it is in bounds and its",
        "// rows are contiguous and 16-byte aligned (tested once a tile); other tiles and widths load as before.",
    ]
    if len(group) > 1:
        comment = [
            f"// KLineage vectorize: the {len(group)} tiles in 16-byte packs of four floats when all of each is in",
            "// bounds and its rows are contiguous and 16-byte aligned (one test for all of them, once a K step);",
            "// otherwise every tile loads as before.",
        ]
    return _dispatch(src, group, comment, [test for test, _ in parts], [packed for _, packed in parts])


def _fresh_names(t: TileLoad) -> Callable[[str], str]:
    """Names the loop's function does not use yet (`kl_v`, `kl_v_2`, ...), each taken once given."""
    taken = X.identifiers(X.enclosing_function(t.loop) or t.loop)
    return lambda name: fresh_numbered(taken, name, "_")


def _condition(head: str, test: list[str], tail: str) -> list[str]:
    """`head`, the test's lines, `tail` as lines of code (a one-line test stays on one line)."""
    if len(test) == 1:
        return [head + test[0] + tail]
    return [head + test[0], *test[1:-1], test[-1] + tail]


def _dispatch(
    src: CudaSource,
    loads: tuple[TileLoad, ...],
    comment: list[str],
    tests: list[list[str]],
    packed: list[list[str]],
) -> CudaSource:
    """`if (C % 4 == 0 && test && ...) { packed ... } else { the loops }` in place of the loops
    (consecutive, see `_next_to`), each loop's pragma kept with it on both sides."""
    ind = edit.indent_of(src, loads[0].loop)
    cond: list[str] = []
    then: list[str] = []
    other: list[str] = []
    edits = []
    for i, t in enumerate(loads):
        part = [f"{X.wrap_text(t.cols)} % 4 == 0 && {tests[i][0]}", *tests[i][1:]]
        if i:
            part[0] = "    " + part[0]
        if i < len(loads) - 1:
            part[-1] += " &&"
        cond += part
        pragma = src.pragma_of(t.loop)
        unroll = [pragma.text.strip()] if pragma is not None else []
        lines = edit.reindent(src.text_of(t.loop).splitlines(), ind)
        then += unroll + packed[i]
        other += unroll + lines
        if pragma is not None:
            edits.append(edit.delete(src, pragma))
        if i:
            edits.append(edit.delete(src, t.loop))
    lines = [
        *comment,
        *_condition("if (", cond, ") {"),
        *[f"    {s}" for s in then],
        "} else {",
        *[f"    {s}" for s in other],
        "}",
    ]
    return edit.apply_edits(src, [edit.replace(loads[0].loop, f"\n{ind}".join(lines)), *edits])


def _bare_type(typ: str) -> str:
    return typ.replace("const", "").strip()


def _whole_parts(t: TileLoad, fresh: Callable[[str], str]) -> tuple[list[str], list[str]]:
    """The whole-tile form of one loop: its once-a-tile test (lines of a lambda called in place)
    and its loop of plain float4 loads."""
    inside, first, v = fresh("kl_tile_in"), fresh("kl_tile_first"), fresh("kl_v")
    rows, cols = X.wrap_text(t.rows), X.wrap_text(t.cols)
    pre, post = t.convert
    ok = t.guard if t.guard is not None else "true"
    params = f"const {_bare_type(t.row_type)} {t.row_var}, const {_bare_type(t.col_type)} {t.col_var}"
    # the guard at the tile's two corners (each comparison is monotone along the tile), the first
    # element's address 16-byte aligned, and a row stride of whole packs
    test = [
        "[&]() -> bool {",
        f"        auto {inside} = [&]({params}) -> bool {{",
        *[f"            {d}" for d in t.decls],
        f"            return {ok};",
        "        };",
        f"        auto {first} = [&]({params}) -> const float* {{",
        *[f"            {d}" for d in t.decls],
        f"            return {t.address};",
        "        };",
        f"        return {inside}(0, 0) && {inside}({rows} - 1, {cols} - 1) &&",
        f"               (reinterpret_cast<unsigned long long>({first}(0, 0)) % 16u) == 0 && ({t.row_stride}) % 4 == 0;",
        "    }()",
    ]
    store = [_substitute(t.store, {t.col_var: f"({t.col_var} + {j})"}) for j in range(4)]
    packed = [
        f"for (int {t.flat} = {t.start}; {t.flat} < {rows} * ({cols} / 4); {t.flat} += {t.step}) {{",
        f"    {t.row_type} {t.row_var} = {t.flat} / ({cols} / 4);",
        f"    {t.col_type} {t.col_var} = {t.flat} % ({cols} / 4) * 4;",
        *[f"    {d}" for d in t.decls],
        f"    const float4 {v} = *reinterpret_cast<const float4*>({t.address});",
        *[f"    {store[j]} = {pre}{v}.{'xyzw'[j]}{post};" for j in range(4)],
        "}",
    ]
    return test, packed


def _apply_per_pack(src: CudaSource, t: TileLoad) -> CudaSource:
    fresh = _fresh_names(t)
    r4, c4, at, v = fresh("kl_r4"), fresh("kl_c4"), fresh("kl_lane_at"), fresh("kl_v")
    lanes = [fresh(f"kl_p{j}") for j in range(4)]
    pre, post = t.convert
    store = [_substitute(t.store, {t.row_var: r4, t.col_var: f"({c4} + {j})"}) for j in range(4)]
    ok = t.guard if t.guard is not None else "true"
    lane_fn = [
        f"auto {at} = [&](const {_bare_type(t.col_type)} {t.col_var}) -> const float* {{",
        f"    const {_bare_type(t.row_type)} {t.row_var} = {r4};",
        *[f"    {d}" for d in t.decls],
        f"    return ({ok}) ? {t.address} : nullptr;",
        "};",
    ]
    packed = [f"const float* {p} = {at}({c4} + {j});" for j, p in enumerate(lanes)]
    whole = fresh("kl_whole")
    contiguous = " && ".join(
        [f"{lanes[0]} != nullptr"]
        + [f"{lanes[j]} == {lanes[0]} + {j}" for j in range(1, 4)]
        + [f"(reinterpret_cast<unsigned long long>({lanes[0]}) % 16u) == 0"]
    )
    packed.append(f"const bool {whole} = {contiguous};")
    vector = [f"const float4 {v} = *reinterpret_cast<const float4*>({lanes[0]});"] + [
        f"{store[j]} = {pre}{v}.{'xyzw'[j]}{post};" for j in range(4)
    ]
    scalar = [f"{store[j]} = {lanes[j]} != nullptr ? {pre}*{lanes[j]}{post} : {t.zero};" for j in range(4)]
    vec_loop = [
        f"for (int {t.flat} = {t.start}; {t.flat} < {X.wrap_text(t.rows)} * ({X.wrap_text(t.cols)} / 4); {t.flat} += {t.step}) {{",
        f"    const int {r4} = {t.flat} / ({X.wrap_text(t.cols)} / 4), {c4} = {t.flat} % ({X.wrap_text(t.cols)} / 4) * 4;",
        *[f"    {s}" for s in lane_fn],
        *[f"    {s}" for s in packed],
        f"    if ({whole}) {{",
        *[f"        {s}" for s in vector],
        "    } else {",
        *[f"        {s}" for s in scalar],
        "    }",
        "}",
    ]
    comment = [
        "// KLineage vectorize: the tile's columns in 16-byte packs of four floats where a pack's four",
        "// addresses are in bounds, consecutive and aligned; other packs and other widths load as before.",
    ]
    return _dispatch(
        src, (t,), comment, [[f"(reinterpret_cast<unsigned long long>({t.pointer}) % 16u) == 0"]], [vec_loop]
    )
