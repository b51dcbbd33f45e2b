"""Shared-memory staging: a block copies a reused tile from global memory into `__shared__` once
(coalesced), synchronizes, and every thread then reads the tile as often as it needs.

Recognised (one site per staged array): exactly one store `tile[I0][I1]... = G` (optionally guarded
by `if (cond)`, optionally in a store loop), each index `Ik` a thread index (`threadIdx.x`, or a
const alias such as `tx`) plus at most a store-loop counter (`ty + k`), then `__syncthreads()`, then
reads `tile[a0][a1]...`. This covers the transpose tile, GEMM A/B tiles (`As[ty][tx] = A[...]`
inside the K loop) and 1-D stencil/row tiles with one store.

Backward: each read becomes the global expression the storing thread would have evaluated, with the
thread indices replaced by the read's indices (`threadIdx.y := a0`, `threadIdx.x := a1`, store-loop
counter := 0) and thread-dependent locals inlined; a guard becomes `cond ? G : 0`. The store (and a
store loop left empty), the declaration and, once no shared memory is left in the function, its
`__syncthreads()` go. Refused: tiles written more than once or by compute, reads before the
barrier, indices that are not thread indices, reassigned thread-dependent locals, or loads with side
effects.

Forward (a naive transpose or permute by any author, `strided_copy.analyze`): a kernel whose one
store copies an element `dst[W] = src[R]` with W and R affine in the thread's coordinates, read
contiguous along one coordinate and written contiguous along another, is rewritten as a tiled
transpose through a shared tile (coalesced on both sides, bounds-checked for odd sizes, other
coordinates as a batch), and its launches get the tile grid and a 32 x 8 block.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

import tree_sitter as ts

from klineage.deopt import _carved as CV
from klineage.deopt import _cexpr as X
from klineage.deopt import _threads as T
from klineage.deopt import strided_copy as SC
from klineage.deopt.base import LaunchValues, Operator, Precondition, Refused, Site
from klineage.source import edit
from klineage.source.constructs import SharedDecl
from klineage.source.model import CudaSource
from klineage.source.syntax import declarator_ident, eval_int, file_constants

_THREAD = re.compile(r"^threadIdx\.([xyz])$")


def _chain(ident: ts.Node) -> list[ts.Node]:
    chain, n = [], ident
    while (
        n.parent is not None
        and n.parent.type == "subscript_expression"
        and n.parent.child_by_field_name("argument") == n
    ):
        n = n.parent
        chain.append(n)
    return chain


def _index(sub: ts.Node) -> ts.Node | None:
    lst = next((c for c in sub.children if c.type == "subscript_argument_list"), None)
    named = list(lst.named_children) if lst is not None else []
    return named[0] if named else None


def _inside(n: ts.Node, outer: ts.Node) -> bool:
    return outer.start_byte <= n.start_byte and n.end_byte <= outer.end_byte


class _Plan:
    """What the rewrite of one staged array needs, or the reason it cannot be done."""

    def __init__(self) -> None:
        self.reason = ""
        self.store: ts.Node | None = None  # the assignment
        self.store_stmt: ts.Node | None = None  # what is deleted
        self.guard: ts.Node | None = None
        self.value: ts.Node | None = None
        self.reads: list[ts.Node] = []  # full subscript expressions
        self.threads: list[str] = []  # per dim: x / y / z
        self.store_loops: set[str] = set()
        self.elem = "float"
        self.scale = ""  # a flat tile's row length: the store index is `thread * scale + counter`


def _locals(src: CudaSource, fn: ts.Node) -> dict[str, tuple[ts.Node, ts.Node]]:
    """name -> (declaration, initializer) for locals declared exactly once with an initializer."""
    seen: dict[str, list[tuple[ts.Node, ts.Node | None]]] = {}
    for decl in (n for n in X.walk(fn) if n.type == "declaration"):
        for d in decl.children_by_field_name("declarator"):
            if d.type == "init_declarator":
                nm = d.child_by_field_name("declarator")
                if nm is not None and nm.type == "identifier":
                    seen.setdefault(src.text_of(nm), []).append((decl, d.child_by_field_name("value")))
            elif d.type == "identifier":
                seen.setdefault(src.text_of(d), []).append((decl, None))
    return {k: (v[0][0], v[0][1]) for k, v in seen.items() if len(v) == 1 and v[0][1] is not None}  # type: ignore[misc]


def _thread_alias(src: CudaSource, init: ts.Node) -> str | None:
    m = _THREAD.match(re.sub(r"\s+", "", src.text_of(init)))
    return m.group(1) if m else None


def _plan(src: CudaSource, d: SharedDecl, skip: tuple[tuple[int, int], ...] = ()) -> _Plan:
    """How one staged array (or carved tile: `skip` holds the carving declarations) is rewritten."""
    p = _Plan()
    p.elem = " ".join(w for w in d.element_type.split() if w not in ("const", "volatile"))
    fn_rec = src.function(d.function) if d.function else None
    if fn_rec is None or d.is_extern:
        p.reason = "dynamic (extern) shared memory or not inside a function"
        return p
    fn = src.node_for(fn_rec)
    uses = [
        n
        for n in X.walk(fn)
        if n.type == "identifier"
        and n.text == d.name.encode()
        and not (d.start <= n.start_byte < d.end)
        and not any(a <= n.start_byte < b for a, b in skip)
    ]
    writes, reads = [], []
    for u in uses:
        ch = _chain(u)
        if len(ch) != len(d.dims):
            p.reason = f"{d.name} is used as a pointer or flat buffer at line {u.start_point.row + 1}"
            return p
        top = ch[-1]
        par = top.parent
        if par is not None and par.type == "pointer_expression" and par.children[0].type == "&":
            p.reason = f"the address of a {d.name} element is taken at line {u.start_point.row + 1}"
            return p
        if par is not None and par.type == "assignment_expression" and par.child_by_field_name("left") == top:
            if src.text_of(par.children[1]) != "=":
                p.reason = (
                    f"{d.name} is updated in place at line {u.start_point.row + 1} (written by compute)"
                )
                return p
            writes.append(par)
        elif par is not None and par.type == "update_expression":
            p.reason = f"{d.name} is updated in place at line {u.start_point.row + 1} (written by compute)"
            return p
        else:
            reads.append(top)
    if len(writes) != 1:
        p.reason = f"{d.name} is written {len(writes)} times (one staging store expected)"
        return p
    if not reads:
        p.reason = f"{d.name} is never read"
        return p
    store = writes[0]
    p.store, p.reads = store, reads
    p.value = store.child_by_field_name("right")
    stmt = store.parent
    if stmt is None or stmt.type != "expression_statement":
        p.reason = "the store is not a statement of its own"
        return p
    holder = stmt
    if (
        stmt.parent is not None
        and stmt.parent.type == "compound_statement"
        and len(stmt.parent.named_children) == 1
        and stmt.parent.parent is not None
        and stmt.parent.parent.type == "if_statement"
    ):
        holder = stmt.parent
    if (
        holder.parent is not None
        and holder.parent.type == "if_statement"
        and holder.parent.child_by_field_name("consequence") == holder
    ):
        ifs = holder.parent
        if ifs.child_by_field_name("alternative") is not None:
            p.reason = "the guarded store has an else branch"
            return p
        cond = ifs.child_by_field_name("condition")
        p.guard = cond.named_children[0] if cond is not None and cond.named_children else cond
        stmt = ifs
    p.store_stmt = stmt
    if any(r.start_byte < store.end_byte for r in reads):
        p.reason = f"{d.name} is read before (or in) its staging store"
        return p
    barriers = [c for c in X.calls_in(fn, {"__syncthreads"}) if store.end_byte <= c.start_byte]
    first_read = min(r.start_byte for r in reads)
    unsynced = not any(b.end_byte <= first_read for b in barriers)
    if (
        p.value is None
        or X.has_side_effects(p.value)
        or (p.guard is not None and X.has_side_effects(p.guard))
    ):
        p.reason = "the staged value has side effects"
        return p
    if d.name.encode() in {n.text for n in X.walk(p.value) if n.type == "identifier"}:
        p.reason = f"the staged value reads {d.name} itself"
        return p
    # store loops: for-loops around the store that do not also hold the reads
    loop = X.enclosing(store, "for_statement")
    while loop is not None and not any(_inside(r, loop) for r in reads):
        init = loop.child_by_field_name("initializer")
        dd = (
            init.child_by_field_name("declarator")
            if init is not None and init.type == "declaration"
            else None
        )
        nm = dd.child_by_field_name("declarator") if dd is not None and dd.type == "init_declarator" else None
        if nm is not None:
            p.store_loops.add(src.text_of(nm))
        loop = X.enclosing(loop, "for_statement")
    # the store's index: one thread index per dimension, plus at most a store-loop counter
    locs = _locals(src, fn)
    lhs = store.child_by_field_name("left")
    assert lhs is not None
    subs = list(reversed([lhs] + [s for s in X.walk(lhs) if s.type == "subscript_expression" and s != lhs]))
    for s in subs:
        idx = _index(s)
        comp = _thread_of_index(src, idx, locs, p.store_loops) if idx is not None else None
        if comp is None and idx is not None and len(subs) == 1:
            comp = _flat_thread(src, fn, idx, locs, p)
        if comp is None:
            p.reason = f"store index `{src.text_of(idx) if idx is not None else '?'}` is not a thread index (+ store-loop counter)"
            return p
        p.threads.append(comp)
    if len(set(p.threads)) != len(p.threads):
        p.reason = "two dimensions of the store use the same thread index"
        return p
    if unsynced and not (
        p.scale and all(_flat_read(src, r, p)[0] == f"threadIdx.{p.threads[0]}" for r in reads)
    ):
        p.reason = f"no __syncthreads() between the store of {d.name} and its first read"
    return p


def _flat_thread(src: CudaSource, fn: ts.Node, idx: ts.Node, locs: dict, p: _Plan) -> str | None:
    """A flat tile's store index `threadIdx.c * C + k` (k the one store loop's counter, from 0 to C
    by one): the thread's row of C elements. Sets p.scale to C; the thread component, or None."""
    m = re.fullmatch(r"\(?\(?threadIdx\.([xyz])\*(\w+)\)?\+(\w+)\)?", re.sub(r"\s+", "", src.text_of(idx)))
    if m is None or m.group(3) not in p.store_loops or len(p.store_loops) != 1:
        return None
    loop = X.enclosing(p.store, "for_statement")
    parts = T.counting_loop(src, loop) if loop is not None else None
    if (
        parts is None
        or parts[0] != m.group(3)
        or re.sub(r"\s+", "", src.text_of(parts[1])) != "0"
        or re.sub(r"\s+", "", src.text_of(parts[2])) != f"{m.group(3)}<{m.group(2)}"
        or m.group(2) in X.assigned_names(fn)
    ):
        return None
    p.scale = m.group(2)
    return m.group(1)


def _flat_read(src: CudaSource, read: ts.Node, p: _Plan) -> tuple[str, str]:
    """(storing thread, store-loop counter) of a flat tile's read `tile[E * C + F]`; `(r) / C`
    and `(r) % C` when the index is not written that way."""
    idx = _index(read)
    r = re.sub(r"\s+", "", src.text_of(idx)) if idx is not None else ""
    m = re.fullmatch(rf"\(?\(?(\w+(?:\.[xyz])?)\*{re.escape(p.scale)}\)?\+(\w+)\)?", r)
    if m is not None:
        return m.group(1), m.group(2)
    return f"({r}) / {p.scale}", f"({r}) % {p.scale}"


def _thread_of_index(src: CudaSource, idx: ts.Node, locs: dict, loops: set[str]) -> str | None:
    terms = []

    def split(n: ts.Node) -> None:
        if n.type == "binary_expression" and src.text_of(n.children[1]) == "+":
            split(n.child_by_field_name("left"))  # type: ignore[arg-type]
            split(n.child_by_field_name("right"))  # type: ignore[arg-type]
        elif n.type == "parenthesized_expression" and n.named_children:
            split(n.named_children[0])
        else:
            terms.append(n)

    split(idx)
    comps = []
    for t in terms:
        txt = re.sub(r"\s+", "", src.text_of(t))
        if (m := _THREAD.match(txt)) is not None:
            comps.append(m.group(1))
        elif t.type == "identifier" and txt in locs and _thread_alias(src, locs[txt][1]) is not None:
            comps.append(_thread_alias(src, locs[txt][1]))
        elif t.type == "identifier" and txt in loops:
            continue
        else:
            return None
    return comps[0] if len(comps) == 1 else None


def _substituted(
    src: CudaSource,
    fn: ts.Node,
    node: ts.Node,
    plan: _Plan,
    read: ts.Node,
    indices: list[str],
    counter: str = "0",
) -> str:
    """`node` (the staged value or guard) as seen by the thread that stored element `indices`, its
    store-loop counter at `counter`."""
    locs = _locals(src, fn)
    by_comp = dict(zip(plan.threads, indices, strict=True))
    written = X.assigned_names(fn)
    depth: list[str] = []

    def thread_dependent(name: str, seen: frozenset[str] = frozenset()) -> bool:
        if name in plan.store_loops:
            return True
        if name not in locs or name in seen:
            return False
        init = locs[name][1]
        if any(
            _THREAD.match(re.sub(r"\s+", "", src.text_of(f)))
            for f in X.walk(init)
            if f.type == "field_expression"
        ):
            return True
        return any(thread_dependent(i, seen | {name}) for i in X.identifiers(init))

    def in_scope(decl: ts.Node) -> bool:
        block = decl.parent
        return block is not None and _inside(read, block) and decl.end_byte <= read.start_byte

    def rw(n: ts.Node) -> str | None:
        if n.type == "field_expression":
            m = _THREAD.match(re.sub(r"\s+", "", src.text_of(n)))
            if m:
                if m.group(1) not in by_comp:
                    raise Refused(
                        f"smem_staging: the staged value uses threadIdx.{m.group(1)}, which no tile index maps"
                    )
                return f"({by_comp[m.group(1)]})"
            return None
        if n.type != "identifier" or (
            n.parent is not None
            and n.parent.type in ("field_expression",)
            and n.parent.child_by_field_name("field") == n
        ):
            return None
        name = src.text_of(n)
        if name in plan.store_loops:
            return counter if counter == "0" else f"({counter})"
        if name in locs:
            decl, init = locs[name]
            alias = _thread_alias(src, init)
            if alias is not None and alias in by_comp:
                return f"({by_comp[alias]})"
            if thread_dependent(name) or not in_scope(decl):
                if name in written:
                    raise Refused(
                        f"smem_staging: thread-dependent local {name} is reassigned; cannot inline it"
                    )
                if name in depth or len(depth) > 20:
                    raise Refused(f"smem_staging: local {name} is defined recursively")
                depth.append(name)
                out = f"({X.render(src, init, rw)})"
                depth.pop()
                return out
        return None

    return X.render(src, node, rw)


class SmemStaging(Operator):
    name = "smem_staging"
    category = "staging"
    intent = (
        "Stage a tile that several threads reuse in shared memory: coalesced global loads once per block, "
        "a barrier, then every reuse reads shared memory instead of global memory."
    )
    mechanical_apply = True  # forward: the tiled transpose of a strided copy (see the module doc)

    def _decls(self, src: CudaSource) -> list[SharedDecl]:
        static = [d for d in src.shared_decls if d.function is not None and not d.is_extern and d.dims]
        return static + [r.decl for r in CV.carved_regions(src)]

    def _carve(self, src: CudaSource, d: SharedDecl) -> CV.Region | None:
        return next((r for r in CV.carved_regions(src) if r.decl == d), None)

    def _plan_of(self, src: CudaSource, d: SharedDecl) -> _Plan:
        c = self._carve(src, d)
        return _plan(src, d, c.carves if c is not None and c.keep_declaration else ())

    def find(self, src: CudaSource) -> list[Site]:
        sites = []
        for d in self._decls(src):
            p = self._plan_of(src, d)
            stores = [
                n for n in X.walk(src.node_for(src.function(d.function))) if n.type == "assignment_expression"
            ]  # type: ignore[arg-type]
            if p.reason and not any(
                X.pointer_base(s.child_by_field_name("left")) is not None  # type: ignore[arg-type]
                and X.pointer_base(s.child_by_field_name("left")).text == d.name.encode()  # type: ignore[union-attr]
                and _global_load(src, s.child_by_field_name("right"))
                for s in stores
            ):
                continue  # not staging (a reduction scratch or a flag): not this operator's business
            sites.append(
                self.site(
                    src,
                    d,
                    f"shared {d.name}{d.dims_text} staged from global memory"
                    + (f" ({len(p.reads)} read(s))" if not p.reason else " (not rewritable)"),
                    array=d.name,
                    reason=p.reason,
                )
            )
        return sites

    def _decl(self, src: CudaSource, site: Site) -> SharedDecl:
        node = src.node_at(site.anchor)
        d = next(
            (
                d
                for d in self._decls(src)
                if node is not None and d.start == node.start_byte and d.name == site.details["array"]
            ),
            None,
        )
        if d is None:
            raise Refused(f"{self.name}: shared array {site.details.get('array')} is gone")
        return d

    def removal_preconditions(self, src: CudaSource, site: Site) -> list[Precondition]:
        p = self._plan_of(src, self._decl(src, site))
        return [
            Precondition(
                "single_staging_store",
                not p.reason,
                "one store from global memory indexed by thread indices, a barrier, then reads only"
                if not p.reason
                else p.reason,
                "Storage",
            )
        ]

    def preconditions(self, src: CudaSource, site: Site) -> list[Precondition]:
        if site.details.get("kind") == "transpose":
            return _transpose_facts(src, site)
        d = self._decl(src, site)
        p = self._plan_of(src, d)
        return [
            Precondition(
                "tile_reused",
                len(p.reads) >= 1,
                f"the tile is read {len(p.reads)} time(s) per store "
                "(by other threads than the one that loaded it)",
                "Storage",
            ),
            Precondition(
                "block_covers_tile",
                True,
                f"the block's threads ({'/'.join(p.threads) or '?'}) cover the "
                f"tile {d.dims_text} (with store loops)",
                "Layout",
            ),
            Precondition(
                "barrier_between_store_and_reads",
                not p.reason or "barrier" not in p.reason,
                "__syncthreads() separates the staging store from the reads",
                "Pipeline",
            ),
            Precondition(
                "smem_budget", True, f"{d.dims_text} {p.elem} fits the per-block shared memory", "Storage"
            ),
        ]

    def _remove(self, src: CudaSource, site: Site) -> CudaSource:
        d = self._decl(src, site)
        p = self._plan_of(src, d)
        carve = self._carve(src, d)
        if p.reason:
            raise Refused(f"{self.name}: {p.reason}")
        assert p.value is not None and p.store_stmt is not None
        fn = src.node_for(src.function(d.function))  # type: ignore[arg-type]
        zero = "0.0f" if p.elem == "float" else "0.0" if p.elem == "double" else f"{p.elem}(0)"
        edits = []
        for r in p.reads:
            base = r
            while base.type == "subscript_expression":
                base = base.child_by_field_name("argument")  # type: ignore[assignment]
            indices = [src.text_of(_index(s)) for s in _chain(base)]  # type: ignore[arg-type]
            counter = "0"
            if p.scale:
                thread, counter = _flat_read(src, r, p)
                indices = [thread]
            val = _substituted(src, fn, p.value, p, r, indices, counter)
            if p.guard is not None:
                g = _substituted(src, fn, p.guard, p, r, indices, counter)
                text = f"(({g}) ? {X.wrap_text(val)} : {zero})"
            else:
                text = val if p.value.type in X.PRIMARY else f"({val})"
            edits.append(edit.replace(r, text))
        # delete the store, climbing out of store loops it leaves empty
        gone = p.store_stmt
        while (par := gone.parent) is not None:
            if (
                par.type == "for_statement"
                and par.child_by_field_name("body") == gone
                and not any(_inside(r, par) for r in p.reads)
            ):
                gone = par
                continue
            if (
                par.type == "compound_statement"
                and par.parent is not None
                and par.parent.type == "for_statement"
                and not any(_inside(r, par.parent) for r in p.reads)
                and all(c.type in ("declaration", "comment") for c in par.named_children if c != gone)
            ):
                gone = par.parent
                continue
            break
        edits.append(edit.delete(src, gone))
        if gone.type == "for_statement" and (pr := src.pragma_of(gone)) is not None:
            edits.append(edit.delete(src, pr))
        decl_node = src.node_for(d)
        if carve is not None and carve.keep_declaration:
            pass  # the buffer: the other tiles are still carved from it
        elif len(decl_node.children_by_field_name("declarator")) == 1:
            edits.append(_delete_with_comment(src, decl_node))
        else:
            raise Refused(f"{self.name}: {d.name} shares its declaration with other arrays")
        others = [o for o in src.shared_decls if o.function == d.function and o.name != d.name]
        if not others and carve is None:  # a carved buffer's barriers serve its other tiles
            for b in X.calls_in(fn, {"__syncthreads"}):
                if b.parent is not None and b.parent.type == "expression_statement" and not _inside(b, gone):
                    edits.append(edit.delete(src, b.parent))
        return edit.apply_edits(src, edits)

    # ---- forward: a strided copy becomes a tiled transpose ------------------------------------
    def find_forward(self, src: CudaSource) -> list[Site]:
        sites = []
        for k in src.kernels:
            try:
                copy = SC.analyze(src, k)
            except SC.NotACopy:
                continue  # not a one-element copy: nothing this step could stage
            store = src.tree.root_node.descendant_for_byte_range(copy.store_start, copy.store_end)
            sites.append(
                self.site(
                    src,
                    store,
                    f"{k.name}: {copy.dst}[..] = {copy.src}[..] over {len(copy.coords)} coordinate(s)",
                    kind="transpose",
                    kernel=k.name,
                )
            )
        return sites

    def shape_preconditions(
        self, src: CudaSource, site: Site, bench: Sequence[LaunchValues]
    ) -> list[Precondition]:
        if site.details.get("kind") != "transpose":
            return []
        small = _tile_never_runs(src, site.details.get("kernel", ""), bench)
        return [
            Precondition(
                "tile_fits_the_sizes",
                small is None,
                "a transposed extent reaches a tile at some bench size"
                if small is None
                else f"at every bench size a transposed extent is shorter than the {SC.TILE}-wide tile "
                f"({small}): only the one-element path would run, with more index work than the naive copy",
                "Layout",
            )
        ]

    def _apply(self, src: CudaSource, site: Site) -> CudaSource:
        kernel = src.function(site.details.get("kernel", ""))
        if site.details.get("kind") != "transpose" or kernel is None:
            raise Refused(f"{self.name}: no forward step at this site")
        try:
            copy = SC.analyze(src, kernel)
        except SC.NotACopy as e:
            raise Refused(f"{self.name}: {e}") from None
        edits = [edit.Edit(kernel.body_start, kernel.body_end, SC.tiled_body(copy, kernel))]
        config_names: set[str] = set()
        for ls in T.launches_of(src, kernel.name):
            cfg = T.config_nodes(src, ls)
            args = T.param_map(kernel, ls)
            config_names |= X.identifiers(cfg[0]) | X.identifiers(cfg[1])
            edits += [
                edit.replace(cfg[0], SC.tiled_grid(copy, args)),
                edit.replace(cfg[1], SC.tiled_block()),
            ]
        return _drop_dead_locals(edit.apply_edits(src, edits), config_names)


def _tile_never_runs(src: CudaSource, name: str, bench: Sequence[LaunchValues]) -> str | None:
    """The transposed extents at each bench size (`P x Q, ...`) when every launch at every size
    has one shorter than the tile; None when a tile runs somewhere or a size cannot be evaluated."""
    kernel = src.function(name)
    try:
        copy = SC.analyze(src, kernel) if kernel is not None else None
    except SC.NotACopy:
        return None
    pair = copy.transposed if copy is not None else None
    if kernel is None or pair is None or not bench:
        return None
    seen = []
    for ls in T.launches_of(src, name):
        launcher = src.function(ls.function or "")
        if launcher is None:
            return None
        args = T.param_map(kernel, ls)
        for values in bench:
            env = {
                p.name: int(v) for p, v in zip(launcher.params, values, strict=False) if isinstance(v, int)
            }
            ext = [eval_int(T.strip_casts(SC.c_text(c.extent, args)), env) for c in pair]
            if any(e is None for e in ext) or min(e for e in ext if e is not None) >= SC.TILE:
                return None
            seen.append(" x ".join(str(e) for e in ext))
    return ", ".join(dict.fromkeys(seen)) or None


def _drop_dead_locals(src: CudaSource, names: set[str]) -> CudaSource:
    """Delete host locals that only the replaced grid and block read (`const int threads = 256;`,
    `dim3 grid(...)`), so that no later step tunes a value nothing uses any more."""
    for _ in range(len(names) + 1):
        dead = []
        for fn in src.launchers:
            body = src.node_for(fn).child_by_field_name("body")
            for decl in body.named_children if body is not None else []:
                ds = decl.children_by_field_name("declarator") if decl.type == "declaration" else []
                name = declarator_ident(ds[0]) if len(ds) == 1 else None
                if (
                    name in names
                    and not X.has_side_effects(decl)
                    and not any(
                        n.type == "identifier" and n.text == name.encode() and not _inside(n, decl)
                        for n in X.walk(body)
                    )
                ):
                    dead.append(decl)
        if not dead:
            return src
        src = edit.apply_edits(src, [_delete_with_comment(src, d) for d in dead])
    return src


def _transpose_facts(src: CudaSource, site: Site) -> list[Precondition]:
    """The structural facts of the forward step: a one-element copy, a strided pair, launches here."""
    kernel = src.function(site.details.get("kernel", ""))
    try:
        copy = SC.analyze(src, kernel) if kernel is not None else None
        why = "" if copy is not None else "the kernel is gone"
    except SC.NotACopy as e:
        copy, why = None, str(e)
    pair = copy.transposed if copy is not None else None
    launches = T.launches_of(src, kernel.name) if kernel is not None else []
    n_args = len(kernel.params) if kernel is not None else -1
    launched = bool(launches) and all(
        len(T.config_nodes(src, ls)) >= 2 and len(ls.args) == n_args for ls in launches
    )
    unit = {"read": copy.unit("read"), "write": copy.unit("write")} if copy is not None else {}
    bound = kernel.launch_bounds[0] if kernel is not None and kernel.launch_bounds else None
    bound_value = eval_int(bound, file_constants(src)) if bound is not None else None
    threads = SC.TILE * SC.ROWS
    return [
        Precondition(
            "launch_bounds_cover_block",
            bound is None or (bound_value is not None and bound_value >= threads),
            f"the kernel's __launch_bounds__ ({bound or 'none'}) allows the {threads}-thread tile block"
            if bound is None or (bound_value is not None and bound_value >= threads)
            else f"__launch_bounds__({bound}) is below the {threads} threads of the tile block",
            "Layout",
        ),
        Precondition(
            "copy_of_one_element",
            copy is not None,
            f"every thread copies one element {copy.src} -> {copy.dst}, indices affine in its "
            f"{len(copy.coords)} coordinate(s)"
            if copy is not None
            else why,
            "Layout",
        ),
        Precondition(
            "strided_pair",
            pair is not None,
            f"the read is contiguous along {pair[0].label}, the write along {pair[1].label}: "
            "one side is strided for consecutive threads"
            if pair is not None
            else "the read and the write are not contiguous along two different coordinates "
            f"(read: {_label(unit.get('read'))}, write: {_label(unit.get('write'))})",
            "Layout",
        ),
        Precondition(
            "launched_here",
            launched,
            "every launch of the kernel is in this file, with a grid and block to replace"
            if launched
            else "the kernel has no launch in this file that passes all its arguments",
            "Layout",
        ),
        Precondition(
            "smem_budget",
            True,
            f"a {SC.TILE} x {SC.TILE} tile of {copy.elem if copy else '?'} fits the per-block shared memory",
            "Storage",
        ),
    ]


def _label(c: SC.Coord | None) -> str:
    return c.label if c is not None else "none contiguous"


def _delete_with_comment(src: CudaSource, node: ts.Node) -> edit.Edit:
    """Delete a statement; a trailing `// comment` on its line goes with it (it described the statement)."""
    data = src.text_bytes
    nl = data.find(b"\n", node.end_byte)
    tail = data[node.end_byte : len(data) if nl < 0 else nl].decode()
    line_start = data.rfind(b"\n", 0, node.start_byte) + 1
    if re.fullmatch(r"\s*//.*", tail) and not data[line_start : node.start_byte].strip():
        return edit.Edit(line_start, len(data) if nl < 0 else nl + 1, "")
    return edit.delete(src, node)


def _global_load(src: CudaSource, value: ts.Node | None) -> bool:
    """True when the stored value reads memory through a pointer (a global load)."""
    if value is None:
        return False
    return any(
        n.type == "subscript_expression"
        or (n.type == "call_expression" and X.callee_name(n) == "__ldg")
        or (n.type == "pointer_expression" and n.children[0].type == "*")
        for n in X.walk(value)
    )
