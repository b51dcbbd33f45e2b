"""Privatized scattered atomics: a per-block copy of a small output in shared memory.

A kernel whose threads do `atomicAdd(&out[idx], v)` with an index read from the data (a
histogram, a bincount, a scatter-add into a small table) sends every update to L2, where the
updates of one bin serialize. When the output is small and its extent fixed (deopt/scatter.py),
each block keeps its own copy in shared memory: zeroed, a barrier, shared-memory atomics, a
barrier, then one global atomic per bin that moved from the identity. A block then issues at most
B global atomics however many elements it sees, which only pays when a block sees many: a
one-element-per-thread kernel is first made grid-stride (grid_stride's forward step, its grid
capped to one wave). Backward, the private copy goes and the updates reach the output directly.

The operation must be associative and commutative for the type: integer add, max, min, and, or,
xor. A floating add reorders the rounding; the naive's global atomics have no fixed order either,
so the workload must already tolerate a reordered sum (its tolerance is the judge, at the gate).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

import tree_sitter as ts

from klineage.deopt import _threads as T
from klineage.deopt import scatter as S
from klineage.deopt._cexpr import render
from klineage.deopt.base import Operator, Precondition, Refused, Site
from klineage.deopt.grid_stride import GridStride
from klineage.source import edit
from klineage.source.constructs import Function
from klineage.source.model import CudaSource
from klineage.source.syntax import fresh_name, unparenthesized

_BARRIERS = r"__syncthreads\w*|__syncwarp|\w*::sync|bar_sync"
Rewrite = Callable[[ts.Node], str | None]
_NEGATED = {"<": ">=", ">=": "<", ">": "<=", "<=": ">", "==": "!=", "!=": "=="}


@dataclass(frozen=True)
class _Scatter:
    """The forward site's parts: the kernel, its updates of one output, the output's type."""

    kernel: Function
    fn: ts.Node
    base: str
    ups: list[S.Update]
    ty: str


@dataclass(frozen=True)
class _Private:
    """A privatized output in an expert: the shared copy, its fill loop, flush loop, barriers."""

    decl: ts.Node
    name: str
    base: str
    op: str
    fill: ts.Node
    flush: ts.Node
    barriers: tuple[ts.Node, ...]
    ups: tuple[S.Update, ...]
    why: str


class PrivatizedAtomics(Operator):
    name = "privatized_atomics"
    category = "staging"
    intent = (
        "Give each block a private copy of a small scattered-atomic output in shared memory (zeroed, "
        "shared atomics, then one global atomic per touched bin), over a grid-stride loop."
    )
    mechanical_apply = True

    # ---- backward ---------------------------------------------------------------------------
    def find(self, src: CudaSource) -> list[Site]:
        sites = []
        for k in src.kernels:
            fn = src.node_for(k)
            for p in _privates(src, fn, k):
                sites.append(
                    self.site(
                        src, p.decl, f"{p.name} privatizes {p.base} in {k.name}", kernel=k.name, shared=p.name
                    )
                )
        return sites

    def _private(self, src: CudaSource, site: Site) -> _Private:
        k = src.kernel(site.details.get("kernel", ""))
        if k is None:
            raise Refused(f"{self.name}: kernel {site.details.get('kernel')} not found")
        found = [p for p in _privates(src, src.node_for(k), k) if p.name == site.details.get("shared")]
        if not found:
            raise Refused(f"{self.name}: no private copy {site.details.get('shared')} at line {site.line}")
        return found[0]

    def removal_preconditions(self, src: CudaSource, site: Site) -> list[Precondition]:
        p = self._private(src, site)
        return [
            Precondition("private_copy_recognised", not p.why, p.why or f"{p.name} -> {p.base}", "Storage"),
        ]

    def _remove(self, src: CudaSource, site: Site) -> CudaSource:
        p = self._private(src, site)
        edits = [edit.delete(src, n) for n in (p.decl, p.fill, p.flush, *p.barriers)]
        for u in p.ups:
            edits.append(edit.replace(u.addr, _address(src, u, p.base)))
        return edit.apply_edits(src, edits)

    # ---- forward ----------------------------------------------------------------------------
    def find_forward(self, src: CudaSource) -> list[Site]:
        sites = []
        for k in src.kernels:
            fn = src.node_for(k)
            seen: set[str] = set()
            for u in S.updates(src, fn):
                if u.base in seen or u.base not in {p.name for p in k.params if p.is_pointer}:
                    continue
                seen.add(u.base)
                sites.append(
                    self.site(
                        src,
                        u.stmt,
                        f"scattered {u.op} into {u.base} in {k.name} could use a per-block copy",
                        kernel=k.name,
                        out=u.base,
                        forward="1",
                    )
                )
        return sites

    def _scatter(self, src: CudaSource, site: Site) -> _Scatter:
        k = src.kernel(site.details.get("kernel", ""))
        if k is None:
            raise Refused(f"{self.name}: kernel {site.details.get('kernel')} not found")
        fn = src.node_for(k)
        base = site.details.get("out", "")
        ups = [u for u in S.updates(src, fn) if u.base == base]
        param = next((p for p in k.params if p.name == base and p.is_pointer), None)
        if not ups or param is None:
            raise Refused(f"{self.name}: no scattered atomic into a pointer parameter {base} in {k.name}")
        return _Scatter(k, fn, base, ups, S.element_type(param.type))

    def preconditions(self, src: CudaSource, site: Site) -> list[Precondition]:
        if site.details.get("forward") != "1":
            return self.removal_preconditions(src, site)
        s = self._scatter(src, site)
        ops = sorted({u.op for u in s.ups})
        ident = S.identity(ops[0], s.ty) if len(ops) == 1 else None
        floating = s.ty in ("float", "double")
        others = S.other_uses(src, s.fn, s.base, s.ups)
        plain = [u for u in s.ups if not S.data_dependent(src, s.fn, src.text_of(u.index))]
        b, how = S.extent(src, s.fn, s.kernel, s.ups)
        size = S.size_of(s.ty) or 0
        body = s.fn.child_by_field_name("body")
        barriers = _foreign_barriers(src, s.fn, s.kernel, body) if body is not None else []
        jumps = _buried_returns(body) if body is not None else []
        return [
            Precondition(
                "associative_update",
                ident is not None,
                f"{'/'.join(ops)} on {s.ty}"
                + (
                    ": a float add reorders the rounding, as the naive's global atomics already do"
                    if floating
                    else ": exact in any order"
                )
                if ident is not None
                else f"{'/'.join(ops)} on {s.ty} is not one associative, commutative update with an identity",
                "Data types",
            ),
            Precondition(
                "written_only_by_atomics",
                not others,
                f"{s.base} is also used at line {others[0]}"
                if others
                else f"{s.base} is touched only by the atomics",
                "Storage",
            ),
            Precondition(
                "data_dependent_index",
                not plain,
                f"the index {T.squash(src.text_of(plain[0].index))} does not read loaded data"
                if plain
                else "every index is read from the data",
                "Layout",
            ),
            Precondition("extent_known", b is not None, how, "Layout"),
            Precondition(
                "fits_shared_memory",
                b is not None and b * size <= S.SMEM_LIMIT,
                f"{b} x {size} bytes against {S.SMEM_LIMIT}" if b is not None else "extent unknown",
                "Hardware",
            ),
            Precondition(
                "one_dimensional_block",
                not re.search(r"threadIdx\.[yz]", src.text_of(s.fn)),
                "1-D thread blocks (the copy is cleared and flushed by a block-stride loop)",
                "Layout",
            ),
            Precondition(
                "barriers_reachable",
                not barriers and not jumps,
                "the kernel already synchronizes (other than around a private copy)"
                if barriers
                else "a return inside a branch or loop would skip the flush's barrier"
                if jumps
                else "no barrier yet but those of other private copies; early returns only at the top of the body",
                "Pipeline",
            ),
        ]

    def _apply(self, src: CudaSource, site: Site) -> CudaSource:
        src = _grid_stride_first(src, site.details.get("kernel", ""))
        again = next(
            (f for f in self.find_forward(src) if f.details.get("kernel") == site.details.get("kernel")),
            None,
        )
        if again is None:
            raise Refused(f"{self.name}: the update is gone after the grid-stride step")
        self._check(self.preconditions(src, again))
        s = self._scatter(src, again)
        b, _ = S.extent(src, s.fn, s.kernel, s.ups)
        ident = S.identity(s.ups[0].op, s.ty)
        assert b is not None and ident is not None
        body = s.fn.child_by_field_name("body")
        taken = {n for d in T.walk(s.fn) if d.type.endswith("declarator") and (n := T.declarator_ident(d))}
        taken |= {p.name for p in s.kernel.params}
        priv = fresh_name(taken, f"{s.base}_priv")
        i = fresh_name(taken, "bin")
        v = fresh_name(taken, "bin_value")
        addrs = {u.addr.start_byte: u for u in s.ups}

        def rewrite(n: ts.Node) -> str | None:
            u = addrs.get(n.start_byte)
            return _address(src, u, priv) if u is not None and n == u.addr else None

        stmts = [c for c in body.named_children]
        inner = _nest_returns(src, stmts, rewrite)
        text = (
            "{\n"
            f"    __shared__ {s.ty} {priv}[{b}];\n"
            f"    for (int {i} = threadIdx.x; {i} < {b}; {i} += blockDim.x) {priv}[{i}] = {ident};\n"
            "    __syncthreads();\n"
            f"{inner}\n"
            "    __syncthreads();\n"
            f"    for (int {i} = threadIdx.x; {i} < {b}; {i} += blockDim.x) {{\n"
            f"        const {s.ty} {v} = {priv}[{i}];\n"
            f"        if ({v} != {ident}) {s.ups[0].op}(&{s.base}[{i}], {v});\n"
            "    }\n"
            "}"
        )
        return edit.apply_edits(src, [edit.replace(body, text)])


# ---- helpers ----------------------------------------------------------------------------------


def _address(src: CudaSource, u: S.Update, base: str) -> str:
    return f"&{base}[{src.text_of(u.index)}]"


def _grid_stride_first(src: CudaSource, kernel: str) -> CudaSource:
    """`src` with the kernel's one-element-per-thread guard made a grid-stride loop, when that
    forward step applies; a block must see many elements for its private copy to pay."""
    op = GridStride()
    for f in op.find_forward(src):
        if f.details.get("kernel") == kernel and all(p.holds for p in op.preconditions(src, f)):
            try:
                return op.apply(src, f)
            except Refused:
                return src
    return src


def _foreign_barriers(src: CudaSource, fn: ts.Node, kernel: Function, body: ts.Node) -> list[ts.Node]:
    """The kernel's barriers other than those that fence a recognised private copy of another
    output: a second output may be privatized around a first (its own fill and flush then wrap
    the whole body, and every thread still reaches each barrier)."""
    fences = [(b.start_byte, b.end_byte) for p in _privates(src, fn, kernel) if not p.why for b in p.barriers]
    return [
        c
        for c in T.calls_named(body, _BARRIERS)
        if not any(a <= c.start_byte and c.end_byte <= e for a, e in fences)
    ]


def _is_early_return(n: ts.Node) -> bool:
    if n.type != "if_statement" or n.child_by_field_name("alternative") is not None:
        return False
    cons = n.child_by_field_name("consequence")
    if cons is None:
        return False
    inner = (
        [c for c in cons.named_children if c.type != "comment"]
        if cons.type == "compound_statement"
        else [cons]
    )
    return len(inner) == 1 and inner[0].type == "return_statement" and not inner[0].named_children


def _buried_returns(body: ts.Node) -> list[ts.Node]:
    """Returns that are not a top-level `if (...) return;` of the body."""
    top = {c.id for c in body.named_children if _is_early_return(c)}
    out = []
    for n in T.walk(body):
        if n.type == "return_statement":
            st = n.parent
            while st is not None and st.type != "if_statement":
                st = st.parent
            if st is None or st.id not in top:
                out.append(n)
    return out


def _negate(src: CudaSource, cond: ts.Node) -> str:
    c = unparenthesized(cond, clause=True)
    if c.type == "binary_expression" and c.child_by_field_name("operator").type in _NEGATED:
        left, right = c.child_by_field_name("left"), c.child_by_field_name("right")
        op = _NEGATED[c.child_by_field_name("operator").type]
        return f"{src.text_of(left)} {op} {src.text_of(right)}"
    return f"!({src.text_of(c)})"


def _nest_returns(src: CudaSource, stmts: list[ts.Node], rewrite: Rewrite, depth: int = 1) -> str:
    """The statements, each top-level `if (C) return;` turned into `if (!C) { rest }`, so that
    every thread reaches the barrier after them."""
    pad = "    " * depth
    out = []
    for k, n in enumerate(stmts):
        if _is_early_return(n):
            rest = _nest_returns(src, stmts[k + 1 :], rewrite, depth + 1)
            out.append(f"{pad}if ({_negate(src, n.child_by_field_name('condition'))}) {{\n{rest}\n{pad}}}")
            break
        out.append(pad + render(src, n, rewrite))
    return "\n".join(out)


def _privates(src: CudaSource, fn: ts.Node, kernel: Function) -> list[_Private]:
    """Shared arrays of the kernel that privatize a pointer parameter (see _private_of)."""
    out = []
    for sd in src.shared_decls:
        if sd.function != kernel.name or len(sd.dims) != 1 or sd.is_extern:
            continue
        p = _private_of(src, fn, kernel, src.node_for(sd), sd.name)
        if p is not None:
            out.append(p)
    return out


def _private_of(src: CudaSource, fn: ts.Node, kernel: Function, decl: ts.Node, name: str) -> _Private | None:
    """The privatization around shared array `name`: a block-stride fill loop writing one value,
    a barrier right after it, a block-stride flush loop whose atomics add `name[b]` into
    `out[b]` for a pointer parameter `out`, a barrier right before it, and the other uses of
    `name` all updates `atomicOp(&name[idx], v)` of the flush's operation."""
    body = fn.child_by_field_name("body")
    if body is None or decl.parent is None:
        return None
    loops = [n for n in T.walk(body) if n.type == "for_statement" and T.uses_ident(n, name)]
    fill = next((lp for lp in loops if _fill_value(src, lp, name) is not None), None)
    flush = next((lp for lp in loops if _flush_of(src, fn, kernel, lp, name) is not None), None)
    if fill is None or flush is None:
        return None
    base, op = _flush_of(src, fn, kernel, flush, name) or ("", "")
    ups = tuple(u for u in S.updates(src, fn) if u.base == name)
    why = ""
    ident = S.identity(op, S.element_type(next(p.type for p in kernel.params if p.name == base)))
    if any(u.op != op for u in ups):
        why = f"the private updates are not all {op}"
    elif ident is None or T.squash(_fill_value(src, fill, name) or "") not in (
        T.squash(ident),
        "0",
        "0.f",
        "0.0f",
    ):
        why = f"{name} does not start from the identity of {op}"
    uses = S.other_uses(src, fn, name, list(ups))
    covered = [(n.start_byte, n.end_byte) for n in (decl, fill, flush)]
    stray = [ln for ln in uses if not any(_row_in(src, s, e, ln) for s, e in covered)]
    if stray and not why:
        why = f"{name} is also used at line {stray[0]}"
    barriers = (_barrier_next_to(fill, +1), _barrier_next_to(flush, -1))
    if any(b is None for b in barriers):
        return None
    return _Private(decl, name, base, op, fill, flush, tuple(b for b in barriers if b is not None), ups, why)


def _row_in(src: CudaSource, start: int, end: int, line: int) -> bool:
    a = src.text_bytes[:start].count(b"\n") + 1
    b = src.text_bytes[:end].count(b"\n") + 1
    return a <= line <= b


def _barrier_next_to(n: ts.Node, step: int) -> ts.Node | None:
    sib = n.next_named_sibling if step > 0 else n.prev_named_sibling
    while sib is not None and sib.type == "comment":
        sib = sib.next_named_sibling if step > 0 else sib.prev_named_sibling
    if sib is not None and sib.type == "expression_statement" and T.calls_named(sib, r"__syncthreads"):
        return sib
    return None


def _block_stride_var(src: CudaSource, loop: ts.Node) -> str | None:
    """The variable of `for (int b = threadIdx.x; b < K; b += blockDim.x)`."""
    init, upd = loop.child_by_field_name("initializer"), loop.child_by_field_name("update")
    if init is None or upd is None or init.type != "declaration":
        return None
    var = T.decl_name(init) or ""
    ds = init.children_by_field_name("declarator")
    val = ds[0].child_by_field_name("value") if len(ds) == 1 else None
    if val is None or T.strip_casts(src.text_of(val)) != "threadIdx.x":
        return None
    if T.squash(src.text_of(upd)) not in (f"{var}+=blockDim.x", f"{var}={var}+blockDim.x"):
        return None
    return var


def _only_statement(loop: ts.Node) -> list[ts.Node]:
    body = loop.child_by_field_name("body")
    if body is None:
        return []
    return (
        [c for c in body.named_children if c.type != "comment"]
        if body.type == "compound_statement"
        else [body]
    )


def _fill_value(src: CudaSource, loop: ts.Node, name: str) -> str | None:
    var = _block_stride_var(src, loop)
    stmts = _only_statement(loop)
    if var is None or len(stmts) != 1 or stmts[0].type != "expression_statement":
        return None
    m = re.fullmatch(rf"{re.escape(name)}\[{re.escape(var)}\]=(.+);", T.squash(src.text_of(stmts[0])))
    return m.group(1) if m else None


def _flush_of(
    src: CudaSource, fn: ts.Node, kernel: Function, loop: ts.Node, name: str
) -> tuple[str, str] | None:
    """(output, operation) when the loop adds `name[b]` (directly or through a local) into `out[b]`."""
    var = _block_stride_var(src, loop)
    if var is None:
        return None
    pointers = {p.name for p in kernel.params if p.is_pointer}
    for u in S.updates(src, loop):
        if u.base not in pointers or T.squash(src.text_of(u.index)) != var:
            continue
        val = T.squash(src.text_of(T.call_args(u.call)[1]))
        if val != f"{name}[{var}]":
            init = T.init_text(src, loop, val) if re.fullmatch(r"\w+", val) else None
            if init is None or T.squash(init) != f"{name}[{var}]":
                continue
        return u.base, u.op
    return None
