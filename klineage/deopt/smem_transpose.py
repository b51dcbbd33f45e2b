"""Shared tile transpose: a 2-D `__shared__` tile stored transposed, so that the threads of a warp
read it along its contiguous dimension.

A GEMM's A tile is copied row-major, one linear thread index split into row and column
(`S[e / BK][e % BK] = A[...]`), then read in the inner product as `S[row + i][k]`: the threads of
a warp hold different rows, so their reads stride by the row length and fall on a few banks (a
bank conflict the hardware serializes). Stored transposed (`S[e % BK][e / BK]`, tile declared
`[BK][BM]`) the same reads become `S[k][row + i]`: neighbouring threads read neighbouring words.

Backward: the tile is declared `[D1][D0]` instead of `[D0][D1]` and every access `S[a][b]`
becomes `S[b][a]` (a bijection between the two layouts: the kernel computes the same values).
Forward: the same rewrite on a tile stored row-major whose reads walk a column across threads.
Sites: every store splits one thread-dependent linear index the same way (`X % W` first and
`X / W` second, or `threadIdx.x` and `threadIdx.y`, for a transposed store; the other order for a
row-major one), and every read is uniform across the threads in one subscript and varies by lane
in the other (the second for a transposed tile, the first for a row-major one).
Preconditions: the tile is a 2-D `__shared__` array declared in the kernel's body, not `extern`,
and the kernel names it only in two-index subscripts that are not address-taken (a pointer into
it, or the array passed on, would read the old layout).
"""

from __future__ import annotations

from dataclasses import dataclass

import tree_sitter as ts

from klineage.deopt import _threads as T
from klineage.deopt.base import Operator, Precondition, Refused, Site
from klineage.source import edit
from klineage.source.model import CudaSource

#: local declarations expanded into an index expression before it is classified
_DEPTH = 6


@dataclass(frozen=True)
class _Access:
    """One `S[a][b]` of the tile: the outer subscript node, its two index nodes, a store or not."""

    node: ts.Node
    first: ts.Node
    second: ts.Node
    store: bool


@dataclass(frozen=True)
class _Tile:
    """A 2-D shared tile of a kernel: its declaration's two sizes and every use of its name."""

    kernel: str
    fn: ts.Node
    name: str
    decl: ts.Node
    sizes: tuple[ts.Node, ts.Node]
    accesses: tuple[_Access, ...]
    #: uses of the name that are not a two-index subscript (or are address-taken)
    loose: int


def _unwrap(node: ts.Node) -> ts.Node:
    """`node` without parentheses and C++ casts around it."""
    while True:
        if node.type == "parenthesized_expression" and node.named_child_count == 1:
            node = node.named_children[0]
        elif node.type == "cast_expression" and (v := node.child_by_field_name("value")) is not None:
            node = v
        elif (
            node.type == "call_expression"
            and T.call_name(node).startswith("static_cast")
            and T.call_args(node)
        ):
            node = T.call_args(node)[0]
        elif node.type == "initializer_list" and node.named_child_count == 1:
            node = node.named_children[0]
        else:
            return node


def _index(sub: ts.Node) -> ts.Node | None:
    """The index expression of a one-index subscript (its brackets left out)."""
    idx = sub.child_by_field_name("indices") or sub.child_by_field_name("index")
    if idx is None:
        return None
    if idx.type == "subscript_argument_list":
        return idx.named_children[0] if idx.named_child_count == 1 else None
    return idx


def _bracket(sub: ts.Node) -> ts.Node | None:
    """The node to swap for a subscript's index: its `[...]` list where the grammar has one."""
    return sub.child_by_field_name("indices") or sub.child_by_field_name("index")


def _visible_init(fn: ts.Node, use: ts.Node, name: str) -> ts.Node | None:
    """The initializer of the declaration of `name` that `use` sees, when it is a local that the
    kernel never assigns (a loop counter or a reassigned variable stays a name)."""
    if name in T.assigned_in(fn):
        return None
    for scope in T.ancestors(use, fn):
        if scope.type not in ("compound_statement", "for_statement"):
            continue
        found = None
        for child in scope.named_children:
            if child.start_byte >= use.start_byte:
                break
            if child.type != "declaration":
                continue
            for d in child.children_by_field_name("declarator"):
                if d.type == "init_declarator" and T.declarator_ident(d) == name:
                    found = d.child_by_field_name("value")
        if found is not None:
            return found
    return None


def _expand(src: CudaSource, fn: ts.Node, node: ts.Node, depth: int = _DEPTH) -> str:
    """`node`'s text with every visible constant local replaced by its parenthesized initializer."""
    node = _unwrap(node)
    edits: list[tuple[int, int, str]] = []
    for n in T.walk(node):
        if n.type != "identifier" or (n.parent is not None and n.parent.type == "field_expression"):
            continue
        init = _visible_init(fn, n, src.text_of(n)) if depth > 0 else None
        if init is not None:
            edits.append((n.start_byte, n.end_byte, f"({_expand(src, fn, init, depth - 1)})"))
    data = src.text_of(node).encode()
    base = node.start_byte
    for s, e, r in sorted(edits, reverse=True):
        data = data[: s - base] + r.encode() + data[e - base :]
    return T.squash(data.decode())


def _split(src: CudaSource, fn: ts.Node, node: ts.Node, depth: int = _DEPTH) -> tuple[str, str] | None:
    """('fast' | 'slow', the split index and divisor) when `node` is the column (`X % W`,
    `threadIdx.x`) or the row (`X / W`, `threadIdx.y`) of a thread-dependent linear index."""
    node = _unwrap(node)
    if node.type == "identifier" and depth > 0:
        init = _visible_init(fn, node, src.text_of(node))
        return _split(src, fn, init, depth - 1) if init is not None else None
    text = T.squash(src.text_of(node))
    if text in ("threadIdx.x", "threadIdx.y"):
        return ("fast" if text.endswith("x") else "slow", "threadIdx")
    if node.type != "binary_expression":
        return None
    op = node.child_by_field_name("operator")
    left, right = node.child_by_field_name("left"), node.child_by_field_name("right")
    if op is None or left is None or right is None or op.type not in ("%", "/"):
        return None
    x = _expand(src, fn, left)
    if T.thread_dependence(src, fn, x) != "lane":
        return None
    return ("fast" if op.type == "%" else "slow", f"{x}|{_expand(src, fn, right)}")


def _accesses(src: CudaSource, fn: ts.Node, name: str) -> tuple[list[_Access], int]:
    out: list[_Access] = []
    loose = 0
    for n in T.walk(fn):
        if n.type != "identifier" or src.text_of(n) != name or n.parent is None:
            continue
        if n.parent.type in ("array_declarator", "init_declarator"):
            continue
        inner = n.parent
        outer = inner.parent
        if (
            inner.type != "subscript_expression"
            or inner.child_by_field_name("argument") != n
            or outer is None
            or outer.type != "subscript_expression"
            or outer.child_by_field_name("argument") != inner
            or (
                outer.parent is not None
                and outer.parent.type in ("pointer_expression", "subscript_expression")
            )
        ):
            loose += 1
            continue
        a, b = _index(inner), _index(outer)
        if a is None or b is None:
            loose += 1
            continue
        p = outer.parent
        store = p is not None and p.type == "assignment_expression" and p.child_by_field_name("left") == outer
        out.append(_Access(outer, a, b, store))
    return out, loose


def _tiles(src: CudaSource) -> list[_Tile]:
    out = []
    for k in src.kernels:
        fn = src.node_for(k)
        body = fn.child_by_field_name("body")
        if body is None:
            continue
        for decl in T.walk(body):
            if decl.type != "declaration" or "__shared__" not in src.text_of(decl).split("[")[0]:
                continue
            if "extern" in src.text_of(decl).split("[")[0]:
                continue
            dcls = decl.children_by_field_name("declarator")
            if len(dcls) != 1 or dcls[0].type != "array_declarator":
                continue
            inner = dcls[0].child_by_field_name("declarator")
            if inner is None or inner.type != "array_declarator":
                continue
            ident = inner.child_by_field_name("declarator")
            d0, d1 = inner.child_by_field_name("size"), dcls[0].child_by_field_name("size")
            if ident is None or ident.type != "identifier" or d0 is None or d1 is None:
                continue
            name = src.text_of(ident)
            acc, loose = _accesses(src, fn, name)
            out.append(_Tile(k.name, fn, name, decl, (d0, d1), tuple(acc), loose))
    return out


def _layout(src: CudaSource, tile: _Tile) -> str | None:
    """'transposed' or 'row_major' when the tile's stores and reads follow one of the two
    patterns of the module docstring, else None."""
    stores = [a for a in tile.accesses if a.store]
    reads = [a for a in tile.accesses if not a.store]
    if (
        not stores
        or not reads
        or any(
            a is not b and b.node.start_byte <= a.node.start_byte < b.node.end_byte
            for a in tile.accesses
            for b in tile.accesses
        )
    ):
        return None  # an access inside another's index: one swap would overlap the other
    orders = set()
    for a in stores:
        f, s = _split(src, tile.fn, a.first), _split(src, tile.fn, a.second)
        if f is None or s is None or f[1] != s[1] or f[0] == s[0]:
            return None
        orders.add(f[0])
    if len(orders) != 1:
        return None
    dep = {
        (
            T.thread_dependence(src, tile.fn, _expand(src, tile.fn, a.first)),
            T.thread_dependence(src, tile.fn, _expand(src, tile.fn, a.second)),
        )
        for a in reads
    }
    if orders == {"fast"} and dep == {("none", "lane")}:
        return "transposed"
    if orders == {"slow"} and dep == {("lane", "none")}:
        return "row_major"
    return None


class SmemTranspose(Operator):
    name = "smem_transpose"
    category = "smem_layout"
    intent = (
        "Store a shared-memory tile transposed when the threads of a warp read it down a column "
        "(a GEMM's A tile read as S[row][k]): the reads become S[k][row], contiguous across lanes, "
        "with no bank conflicts."
    )
    mechanical_apply = True

    def _sites(self, src: CudaSource, layout: str) -> list[Site]:
        return [
            self.site(
                src,
                t.decl,
                f"{t.name} in {t.kernel} is stored {layout.replace('_', '-')}",
                kernel=t.kernel,
                tile=t.name,
            )
            for t in _tiles(src)
            if _layout(src, t) == layout
        ]

    def find(self, src: CudaSource) -> list[Site]:
        return self._sites(src, "transposed")

    def find_forward(self, src: CudaSource) -> list[Site]:
        return self._sites(src, "row_major")

    def _at(self, src: CudaSource, site: Site) -> _Tile:
        tile = next(
            (
                t
                for t in _tiles(src)
                if t.kernel == site.details.get("kernel") and t.name == site.details.get("tile")
            ),
            None,
        )
        if tile is None:
            raise Refused(
                f"{self.name}: no 2-D shared tile {site.details.get('tile')} in {site.details.get('kernel')}"
            )
        return tile

    def _facts(self, src: CudaSource, site: Site, layout: str) -> list[Precondition]:
        tile = self._at(src, site)
        seen = _layout(src, tile)
        return [
            Precondition(
                "subscripted_only",
                tile.loose == 0,
                f"{tile.name} is named only in two-index subscripts, none address-taken"
                if tile.loose == 0
                else f"{tile.name} is named {tile.loose} time(s) outside a two-index subscript: the old layout would leak",
                "Layout",
            ),
            Precondition(
                f"{layout}_tile",
                seen == layout,
                f"{tile.name}'s stores split one thread index and its reads vary by lane in one subscript ({layout})"
                if seen == layout
                else f"{tile.name}'s accesses are not the {layout} pattern (found: {seen})",
                "Layout",
            ),
        ]

    def removal_preconditions(self, src: CudaSource, site: Site) -> list[Precondition]:
        return self._facts(src, site, "transposed")

    def preconditions(self, src: CudaSource, site: Site) -> list[Precondition]:
        return self._facts(src, site, "row_major")

    def _swap(self, src: CudaSource, site: Site) -> CudaSource:
        tile = self._at(src, site)
        d0, d1 = tile.sizes
        edits = edit.swap(src, d0, d1)
        for a in tile.accesses:
            inner = a.node.child_by_field_name("argument")
            first, second = _bracket(inner), _bracket(a.node)
            assert first is not None and second is not None
            edits += edit.swap(src, first, second)
        return edit.apply_edits(src, edits)

    def _remove(self, src: CudaSource, site: Site) -> CudaSource:
        return self._swap(src, site)

    def _apply(self, src: CudaSource, site: Site) -> CudaSource:
        return self._swap(src, site)
