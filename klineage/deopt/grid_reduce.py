"""Grid reduction: a single-output reduction (a sum, maximum or minimum of a whole vector) spread
over the threads of a grid, instead of one thread walking the vector alone.

With one thread, the reduction's latency is one thread's walk over N elements and one load in
flight at a time. Spread over a grid, each thread accumulates a grid-stride slice (`i = blockIdx.x
* B + threadIdx.x`, `i += gridDim.x * B`: coalesced loads, every multiprocessor busy), the block
combines its threads' partials with an all-reduce (warp shuffles and shared memory), thread 0
stores one partial per block, and a second kernel of one block folds the partials the same way
(two passes and no atomics: the order of the additions is fixed, so two runs agree bit for bit).
A kernel of one block that block-strides the vector and all-reduces is the same optimization for
a single multiprocessor (the form `apply` writes).

Backward (`remove`), on a grid-strided kernel storing `partials[blockIdx.x]` and the one-block
kernel its launcher passes those partials to (with the grid as their count), or on a one-block
reduction kernel alone: every launch of those kernels runs `<<<1, 1>>>` (the count becomes 1),
and inside them thread and block indices become 0, the grid and block sizes 1, the exchange
between threads goes (block_per_row's analysis: shared slots, barriers, shuffles), an all-reduce
call `reduce(v)` becomes `v`, and the arithmetic and thread-0 tests left behind are folded.
An `if constexpr` on a template flag that every launch binds alike keeps its launched branch
only (a tail that the threads of a grid share would be wrong for one thread in the other).

Forward (`apply`), on a kernel launched `<<<1, 1>>>` whose loops walk the data and carry sum/max/min
reductions: one block of 256 threads, every loop starts at `A + threadIdx.x` and steps by
`blockDim.x`, each reduction is all-reduced after its loop (block_per_row's warp butterfly and one
shared slot per warp), stores are done by thread 0.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field

import tree_sitter as ts

from klineage.deopt import _threads as T
from klineage.deopt.base import Precondition, Refused, Site
from klineage.deopt.block_per_row import BlockPerRow
from klineage.deopt.rows import (
    BLOCK_COOP,
    COLLECTIVE,
    LOOPS,
    BlockRows,
    Reduction,
    base_name,
    fact,
    fn_texts,
    is_pointer,
    outer_loops,
    reaches,
    write_target,
)
from klineage.source import edit
from klineage.source.model import CudaSource

#: block size of the one-block reduction `apply` writes
BLOCK_THREADS = 256
#: most blocks of the two-pass form's first pass: beyond BLOCK_THREADS * GRID_BLOCKS elements each
#: thread accumulates several before the block's tree (the final pass folds at most this many)
GRID_BLOCKS = 1024
_INDEX = re.compile(r"(threadIdx|blockIdx|blockDim|gridDim)\.([xyz])")
_PURE = re.compile(r"[\w.\s+\-*/%<>&|^]*")  # no calls, no assignments


@dataclass
class _Grid(BlockRows):
    """A reduction kernel run by many threads: block_per_row's exchange analysis plus the thread
    roles of a grid-stride (or block-stride) reduction and its one stored value."""

    multi: bool = False  # several blocks (grid-stride, one partial per block)
    index_vars: set[str] = field(default_factory=set)  # `tid`, `stride`: folded away afterwards
    partials: str = ""  # multi: the pointer parameter of the per-block partials


def _one_thread_launches(src: CudaSource, kernel: str) -> bool:
    """Whether the kernel is launched, always `<<<1, 1, ...>>>`."""
    consts = T.file_constants(src)
    launches = T.launches_of(src, kernel)
    return bool(launches) and all(
        len(c := T.config_nodes(src, ls)) >= 2
        and T.eval_int(src.text_of(c[0]), consts) == 1
        and T.eval_int(src.text_of(c[1]), consts) == 1
        for ls in launches
    )


def _emptied_blocks(body: ts.Node, deleted: list[ts.Node]) -> None:
    """Add to `deleted` the nested `{ ... }` blocks all of whose statements are deleted (the
    block all-reduce `apply` writes goes whole, comments included)."""
    changed = True
    while changed:
        changed = False
        for c in T.walk(body):
            if (
                c.type != "compound_statement"
                or c == body
                or c.parent is None
                or c.parent.type != "compound_statement"
            ):
                continue
            kids = [k for k in c.named_children if k.type != "comment"]
            covered = [
                any(d.start_byte <= k.start_byte and k.end_byte <= d.end_byte for d in deleted) for k in kids
            ]
            if (
                kids
                and all(covered)
                and not any(d.start_byte <= c.start_byte and c.end_byte <= d.end_byte for d in deleted)
            ):
                deleted.append(c)
                changed = True


def _outermost(nodes: list[ts.Node]) -> list[ts.Node]:
    return [
        d
        for d in nodes
        if not any(o is not d and o.start_byte <= d.start_byte and d.end_byte <= o.end_byte for o in nodes)
    ]


class GridReduce(BlockPerRow):
    name = "grid_reduce"
    category = "tiling"
    intent = (
        "Spread a single-output reduction over the threads of a grid instead of one thread: threads "
        "accumulate grid-strided slices (coalesced), each block all-reduces its partials through warp "
        "shuffles and shared memory and thread 0 stores one partial per block; one block folds the "
        "partials in a fixed order (deterministic, no atomics)."
    )
    mechanical_apply = True

    # ---- if constexpr on a launch-bound template flag -----------------------------------------
    def _dead_branches(
        self, src: CudaSource, fn: ts.Node, kernel: str
    ) -> list[tuple[ts.Node, ts.Node | None]]:
        """Top-level `if constexpr (F)` / `(!F)` statements of a kernel whose template flag F every
        launch binds to the same literal: (the statement, its launched branch or None)."""
        info = next((k for k in src.kernels if k.name == kernel), None)
        body = fn.child_by_field_name("body")
        launches = T.launches_of(src, kernel)
        if info is None or body is None or not launches or not info.template_params:
            return []
        out = []
        for s in body.named_children:
            if s.type != "if_statement" or not any(c.type == "constexpr" for c in s.children):
                continue
            m = re.fullmatch(r"\((!?)(\w+)\)", T.squash(src.text_of(s.child_by_field_name("condition"))))
            if m is None:
                continue
            vals = {T.squash(T.template_map(src, info, ls).get(m.group(2), "?")) for ls in launches}
            if len(vals) != 1 or (v := vals.pop()) not in ("true", "false", "1", "0"):
                continue
            taken = (v in ("true", "1")) != bool(m.group(1))
            alt = s.child_by_field_name("alternative")
            live = (
                s.child_by_field_name("consequence")
                if taken
                else (alt.named_children[-1] if alt is not None else None)
            )
            out.append((s, live))
        return out

    def _pruned(self, src: CudaSource, kernels: list[str]) -> CudaSource:
        """`src` with the dead `if constexpr` branches of `kernels` gone (the launched one kept)."""
        edits = []
        for name in kernels:
            k = next((k for k in src.kernels if k.name == name), None)
            if k is None:
                continue
            for s, live in self._dead_branches(src, src.node_for(k), name):
                if live is None:
                    edits.append(edit.delete(src, s))
                    continue
                stmts = [c for c in live.named_children] if live.type == "compound_statement" else [live]
                ind = edit.indent_of(src, s)
                edits.append(
                    edit.replace(s, f"\n{ind}".join(src.text_of(c) for c in stmts) if stmts else ";")
                )
        return edit.apply_edits(src, edits) if edits else src

    # ---- analysis: a reduction run by many threads (backward) ----------------------------------
    def _grid(self, src: CudaSource, fn: ts.Node, kernel: str) -> _Grid | None:
        body = fn.child_by_field_name("body")
        if body is None:
            return None
        uses = {m.group(0) for m in _INDEX.finditer(T.squash(src.text_of(body)))}
        if "threadIdx.x" not in uses:
            return None
        consts = T.file_constants(src)
        out = _Grid(kernel, [])
        others = sorted(uses - {"blockIdx.x", "threadIdx.x", "blockDim.x", "gridDim.x"})
        out.facts.append(
            fact(
                "one_dimensional",
                not others,
                "threads and blocks are numbered along x only"
                if not others
                else f"the kernel uses {', '.join(others)}",
                "Layout",
            )
        )
        launches = T.launches_of(src, kernel)
        syms, grids = {"blockDim.x"}, []
        for ls in launches:
            cfg = T.config_nodes(src, ls)
            if len(cfg) >= 2:
                block = T.squash(src.text_of(cfg[1]))
                if re.fullmatch(r"[A-Za-z_]\w*", block):
                    syms.add(block)
                grids.append(T.squash(src.text_of(cfg[0])))
        out.block_syms = tuple(sorted(syms))
        out.multi = bool({"blockIdx.x", "gridDim.x"} & uses) or any(T.eval_int(g, consts) != 1 for g in grids)
        if not launches or len(grids) != len(launches):
            out.facts.append(
                fact(
                    "launch_in_file",
                    False,
                    f"no launch of {kernel} with a configuration in this file",
                    "Layout",
                )
            )
        out.facts.append(self._exchanges(src, body, out, "the threads"))  # block_per_row's classification
        _emptied_blocks(body, out.deleted)
        gone = [(d.start_byte, d.end_byte) for d in out.deleted]

        def alive(n: ts.Node) -> bool:
            return not any(a <= n.start_byte < b for a, b in gone)

        atomics = [c for c in T.calls_named(body, r"atomic\w+") if alive(c)]
        out.facts.append(
            fact(
                "no_atomics",
                not atomics,
                "no atomics: each block's value is stored once, the fold order is fixed"
                if not atomics
                else f"`{T.call_name(atomics[0])}` on line {atomics[0].start_point.row + 1}: the "
                "threads combine through atomics, not one stored value per block",
                "Storage",
            )
        )
        out.facts.append(self._roles(src, fn, body, out, alive))
        out.facts.append(self._stored(src, fn, body, out, alive))
        return out

    def _roles(
        self, src: CudaSource, fn: ts.Node, body: ts.Node, out: _Grid, alive: Callable[[ts.Node], bool]
    ) -> Precondition:
        """Thread and block indices may only start strided loops (through a global index
        `tid = blockIdx.x * B + threadIdx.x` and a stride `gridDim.x * B` on a grid, or
        `threadIdx.x` and the block size in one block), pick thread 0, and name the block's
        partial; the strided loops must carry only sum/max/min reductions and run to the end."""
        assigned = T.assigned_in(fn)
        syms = set(out.block_syms)
        tids, strides = set(), set()
        allowed: list[ts.Node] = []
        for d in T.walk(body):
            if d.type != "init_declarator" or d.child_by_field_name("value") is None or not alive(d):
                continue
            name, value = T.declarator_ident(d) or "", d.child_by_field_name("value")
            if name in assigned:
                continue
            if T.global_tid(src.text_of(value)) in syms:
                tids.add(name)
                allowed.append(value)
            elif T.grid_stride(src.text_of(value)) in syms:
                strides.add(name)
                allowed.append(value)
        out.index_vars = tids | strides
        starts = tids | {"threadIdx.x"} if not out.multi else tids
        steps = strides if out.multi else strides | syms
        bad: list[str] = []
        loops = []
        for loop in [n for n in T.walk(body) if n.type == "for_statement" and alive(n)]:
            init, upd = loop.child_by_field_name("initializer"), loop.child_by_field_name("update")
            if init is None or upd is None or init.type != "declaration":
                continue
            ds = init.children_by_field_name("declarator")
            value = (
                ds[0].child_by_field_name("value")
                if len(ds) == 1 and ds[0].type == "init_declarator"
                else None
            )
            v = T.squash(src.text_of(value)) if value is not None else ""
            var = T.decl_name(init) or ""
            start = re.fullmatch(r"(?:[\w.]+\+)?\(?([\w.]+)\)?", v)
            if start is None or (start.group(1) not in starts and T.global_tid(v) not in syms):
                continue
            m = re.fullmatch(rf"{re.escape(var)}\+=(.+)", T.squash(src.text_of(upd)))
            step = m.group(1) if m else ""
            if step not in steps and (not out.multi or T.grid_stride(step) not in syms):
                bad.append(
                    f"the loop on line {loop.start_point.row + 1} starts at the thread's index but does not "
                    "step by " + ("the grid (gridDim.x * B)" if out.multi else "the block size")
                )
                continue
            lbody = loop.child_by_field_name("body")
            if lbody is None or T.jumps_out(loop):
                bad.append(
                    f"the loop on line {loop.start_point.row + 1} leaves early (break/continue/return): "
                    "one thread would stop where the others went on"
                )
                continue
            _, why = self._reductions(src, fn, loop, lbody, set(T.local_decls(loop)))
            if why:
                bad.append(f"line {loop.start_point.row + 1}: {why[0]}")
                continue
            loops.append(loop)
            allowed += [value, upd]
        for n in T.walk(body):
            if not alive(n) or any(a.start_byte <= n.start_byte < a.end_byte for a in allowed):
                continue
            t = T.squash(src.text_of(n)) if n.type in ("field_expression", "identifier") else ""
            if (
                n.type == "field_expression"
                and t in ("threadIdx.x", "blockIdx.x", "gridDim.x")
                or n.type == "identifier"
                and t in out.index_vars
                and (
                    n.parent is None
                    or n.parent.type not in ("init_declarator",)
                    or n.parent.child_by_field_name("value") == n
                )
            ):
                p = n.parent
                txt = T.squash(src.text_of(p)) if p is not None else ""
                if t == "threadIdx.x" and re.fullmatch(r"threadIdx\.x(==|!=)0|0(==|!=)threadIdx\.x", txt):
                    continue  # thread 0 picked
                if t == "blockIdx.x" and out.multi and p is not None and p.type == "subscript_argument_list":
                    continue  # the block's partial (checked with the store)
                bad.append(f"`{t}` on line {n.start_point.row + 1} is used beyond starting a strided loop")
        holds = not bad and bool(loops)
        what = (
            "grid-strided (tid = blockIdx.x * B + threadIdx.x, stride gridDim.x * B)"
            if out.multi
            else "block-strided (threadIdx.x, step the block size)"
        )
        return fact(
            "thread_only_strides",
            holds,
            f"thread indices only start {len(loops)} {what} loop(s) of sum/max/min reductions and pick "
            "thread 0"
            if holds
            else (bad[0] if bad else f"no {what} loop"),
            "Layout",
        )

    def _stored(
        self, src: CudaSource, fn: ts.Node, body: ts.Node, out: _Grid, alive: Callable[[ts.Node], bool]
    ) -> Precondition:
        """Exactly one value leaves each block, stored by thread 0: `partials[blockIdx.x]` on a
        grid, a fixed element in one block."""
        loops = [n for n in T.walk(body) if n.type in LOOPS and alive(n)]
        stores = {}
        for n in T.walk(body):
            if n.type not in ("assignment_expression", "update_expression") or not alive(n):
                continue
            left = write_target(n)
            if left is None or left.type == "identifier" or not is_pointer(fn, base_name(left) or ""):
                continue
            stores[n.start_byte] = n
        if len(stores) != 1:
            return fact(
                "one_value_per_block",
                False,
                f"the block stores {len(stores)} values (one partial per "
                "block is the grid reduction's output)"
                if stores
                else "the kernel stores nothing",
                "Storage",
            )
        (n,) = stores.values()
        left = write_target(n)
        line = n.start_point.row + 1
        if any(lp.start_byte <= n.start_byte < lp.end_byte for lp in loops):
            return fact("one_value_per_block", False, f"the store on line {line} is inside a loop", "Storage")
        picked = any(
            re.fullmatch(r"\(threadIdx\.x==0\)|\(0==threadIdx\.x\)", T.squash(cond))
            for _, cond in T.guards(src, n)
        )
        if not picked:
            return fact(
                "one_value_per_block",
                False,
                f"the store on line {line} is not done by thread 0 alone",
                "Storage",
            )
        if left.type != "subscript_expression" and not (left.type == "pointer_expression"):
            return fact(
                "one_value_per_block", False, f"the store on line {line} is not an element", "Storage"
            )
        idx = T.squash(src.text_of(left)[len(src.text_of(left.child_by_field_name("argument") or left)) :])
        if out.multi and idx != "[blockIdx.x]":
            return fact(
                "one_value_per_block",
                False,
                f"the partials on line {line} are indexed by {idx.strip('[]')}, not blockIdx.x",
                "Layout",
            )
        if not out.multi and _INDEX.search(idx):
            return fact(
                "one_value_per_block", False, f"the store on line {line} depends on the thread", "Layout"
            )
        out.partials = base_name(left) or ""
        return fact(
            "one_value_per_block",
            True,
            "thread 0 stores the block's one value"
            + (f" at `{out.partials}[blockIdx.x]`" if out.multi else ""),
            "Storage",
        )

    def _final_of(self, src: CudaSource, out: _Grid) -> tuple[str, Precondition, list[tuple[object, int]]]:
        """The kernel the launcher passes the partials to: (its name, the fact, [(launch, count argument index)])."""
        info = next(k for k in src.kernels if k.name == out.kernel)
        consts = T.file_constants(src)
        found, counts, why = set(), [], ""
        for ls in T.launches_of(src, out.kernel):
            arg = T.squash(T.param_map(info, ls).get(out.partials, "?"))
            grid = T.squash(ls.grid)
            launcher = T.enclosing_launcher(src, ls)
            later = [
                o
                for o in src.launch_sites
                if o.name != out.kernel
                and o.start > ls.end
                and launcher is not None
                and T.enclosing_launcher(src, o) == launcher
                and arg in [T.squash(a) for a in o.args]
            ]
            if not later:
                why = f"line {ls.line}: no later launch in the launcher reads `{arg}`"
                continue
            fin = later[0]
            if T.eval_int(fin.grid, consts) != 1:
                why = f"the final pass {fin.name}<<<{fin.grid}, ...>>> is not a single block"
                continue
            idx = [i for i, a in enumerate(fin.args) if T.squash(a) == grid]
            if len(idx) != 1:
                why = f"{fin.name} is not passed the grid `{ls.grid}` as the partials' count"
                continue
            found.add(fin.name)
            counts.append((fin, idx[0]))
        if why or len(found) != 1:
            return (
                "",
                fact("final_single_block", False, why or "the partials go to different kernels", "Layout"),
                [],
            )
        name = found.pop()
        fk = next((k for k in src.kernels if k.name == name), None)
        f = self._grid(src, src.node_for(fk), name) if fk is not None else None
        if f is None or f.multi or not f.ok:
            reason = next(
                (x.reason for x in (f.facts if f is not None else []) if not x.holds),
                "it is not a block-strided reduction",
            )
            return "", fact("final_single_block", False, f"the final pass {name}: {reason}", "Layout"), []
        return (
            name,
            fact(
                "final_single_block",
                True,
                f"one block of {name} folds the partials (count = the grid)",
                "Layout",
            ),
            counts,
        )

    # ---- operator interface ------------------------------------------------------------------
    def _analyse(self, src: CudaSource, kernel: str) -> tuple[CudaSource, _Grid | None, str, list]:
        """(the source with dead constexpr branches gone, the kernel's analysis, its final kernel,
        the final launches' count arguments)."""
        pr = self._pruned(src, [k.name for k in src.kernels])
        k = next((k for k in pr.kernels if k.name == kernel), None)
        g = self._grid(pr, pr.node_for(k), kernel) if k is not None else None
        final, counts = "", []
        if g is not None and g.multi:
            if g.partials:
                final, final_fact, counts = self._final_of(pr, g)
            else:
                final_fact = fact("final_single_block", False, "no partial per block to fold", "Layout")
            g.facts.append(final_fact)
        dead = [
            self._dead_branches(src, src.node_for(k), k.name)
            for k in src.kernels
            if k.name in (kernel, final)
        ]
        if g is not None and any(dead):
            g.facts.append(
                fact(
                    "launched_branch_only",
                    True,
                    "an `if constexpr` on a template flag every launch binds alike keeps its launched branch",
                    "Layout",
                )
            )
        return pr, g, final, counts

    def find(self, src: CudaSource) -> list[Site]:
        sites, finals = [], set()
        pr = self._pruned(src, [k.name for k in src.kernels])
        for k in pr.kernels:
            g = self._grid(pr, pr.node_for(k), k.name)
            if g is None or not (g.deleted or g.reducer_calls):
                continue
            if g.multi:
                if "gridDim.x" not in T.squash(pr.text_of(pr.node_for(k))):  # not grid-strided
                    continue
                _, _, final, _ = self._analyse(src, k.name)
                finals.add(final)
                sites.append(
                    (
                        k.name,
                        f"kernel {k.name}: grid reduction"
                        + (f", partials folded by {final}" if final else ""),
                    )
                )
            elif g.ok:
                sites.append((k.name, f"kernel {k.name}: one-block reduction"))
        out = []
        for name, summary in sites:
            if name in finals and "one-block" in summary:
                continue
            kk = next(k for k in src.kernels if k.name == name)
            out.append(self.site(src, src.node_for(kk), summary, kernel=name))
        return out

    def removal_preconditions(self, src: CudaSource, site: Site) -> list[Precondition]:
        _, g, _, _ = self._analyse(src, site.details["kernel"])
        if g is None:
            return [fact("parallel_reduction", False, "no thread-parallel reduction kernel here", "Layout")]
        return g.facts

    def _remove(self, src: CudaSource, site: Site) -> CudaSource:
        pr, g, final, counts = self._analyse(src, site.details["kernel"])
        assert g is not None and g.ok
        groups = [g]
        if final:
            fk = next(k for k in pr.kernels if k.name == final)
            f = self._grid(pr, pr.node_for(fk), final)
            assert f is not None
            groups.append(f)
        edits: list[edit.Edit] = []
        for gr in groups:
            edits += self._one_thread(pr, gr)
            for ls in T.launches_of(pr, gr.kernel):
                cfg = T.config_nodes(pr, ls)
                edits += [edit.replace(cfg[0], "1"), edit.replace(cfg[1], "1")]
        for fin, i in counts:
            call = pr.node_for(fin)
            edits.append(edit.replace(T.call_args(call)[i], "1"))
        out = edit.apply_edits(pr, edits)
        names = [gr.kernel for gr in groups]
        out = self._inline_indices(out, names, set().union(*(gr.index_vars for gr in groups)))
        return _fold(out, names)

    def _one_thread(self, src: CudaSource, g: _Grid) -> list[edit.Edit]:
        """The edits that leave one thread of one block doing the kernel's work."""
        fn = src.node_for(next(k for k in src.kernels if k.name == g.kernel))
        body = fn.child_by_field_name("body")
        deleted = _outermost(g.deleted)
        edits = [
            edit.delete(src, d)
            if d.parent is not None and d.parent.type == "compound_statement"
            else edit.replace(d, ";")
            for d in deleted
        ]
        gone = [(d.start_byte, d.end_byte) for d in deleted]

        def alive(n: ts.Node) -> bool:
            return not any(a <= n.start_byte < b for a, b in gone)

        calls = [c for c in g.reducer_calls if alive(c)]
        edits += [edit.replace(c, T.paren(self._alone(src, T.call_args(c)[0], g.block_syms))) for c in calls]
        inside = [(c.start_byte, c.end_byte) for c in calls]
        consts = [
            (d.start_byte, d.end_byte)
            for d in T.walk(body)
            if d.type == "declaration" and re.match(r"\s*(static\s+)?constexpr\b", src.text_of(d))
        ]
        for n in T.walk(body):
            if not alive(n) or any(a <= n.start_byte < b for a, b in inside + consts):
                continue
            t = T.squash(src.text_of(n)) if n.type in ("field_expression", "identifier") else ""
            if n.type == "field_expression" and t in ("threadIdx.x", "blockIdx.x"):
                edits.append(edit.replace(n, "0"))
            elif n.type == "field_expression" and t == "gridDim.x":
                edits.append(edit.replace(n, "1"))
            elif t in g.block_syms and (
                n.type == "field_expression" or n.parent is None or n.parent.type != "field_expression"
            ):
                edits.append(edit.replace(n, "1"))
        return edits

    @staticmethod
    def _alone(src: CudaSource, arg: ts.Node, syms: tuple[str, ...]) -> str:
        """An all-reduce's argument as the one thread computes it."""
        text = re.sub(r"\b(threadIdx|blockIdx)\s*\.\s*x\b", "0", src.text_of(arg))
        text = re.sub(r"\bgridDim\s*\.\s*x\b", "1", text)
        for s in syms:
            text = re.sub(rf"(?<![\w.]){re.escape(s)}(?!\w)", "1", text)
        return text

    def _inline_indices(self, src: CudaSource, kernels: list[str], names: set[str]) -> CudaSource:
        """`const int tid = 0 * 1 + 0;` and `stride = 1 * 1`: the index variables' uses become
        their (folded) values and their declarations go."""
        src = _fold(src, kernels)
        edits = []
        for k in [k for k in src.kernels if k.name in kernels]:
            fn = src.node_for(k)
            for d in T.walk(fn):
                if d.type != "init_declarator" or (name := T.declarator_ident(d) or "") not in names:
                    continue
                value = d.child_by_field_name("value")
                decl = d.parent
                if (
                    value is None
                    or value.type != "number_literal"
                    or decl is None
                    or len(decl.children_by_field_name("declarator")) != 1
                ):
                    continue
                uses = [
                    u
                    for u in T.walk(fn)
                    if u.type == "identifier"
                    and u.text == name.encode()
                    and u.start_byte != d.child_by_field_name("declarator").start_byte
                ]
                edits += [edit.replace(u, src.text_of(value)) for u in uses] + [edit.delete(src, decl)]
        return edit.apply_edits(src, edits) if edits else src

    # ---- forward: one thread -> one block ------------------------------------------------------
    def find_forward(self, src: CudaSource) -> list[Site]:
        sites = []
        for k in src.kernels:
            fn = src.node_for(k)
            body = fn.child_by_field_name("body")
            if body is None or not outer_loops(body) or _INDEX.search(src.text_of(body)):
                continue
            if _one_thread_launches(src, k.name):
                form = (
                    "a grid and a final pass"
                    if isinstance(self._split(src, fn, k.name), _Split)
                    else "one block"
                )
                sites.append(
                    self.site(
                        src, fn, f"kernel {k.name}: one thread reduces (forward: {form})", kernel=k.name
                    )
                )
        return sites

    def preconditions(self, src: CudaSource, site: Site) -> list[Precondition]:
        fn = src.node_at(site.anchor)
        if fn is None:
            return [fact("one_thread", False, "the kernel is not at this anchor", "Layout")]
        return self._one_thread_facts(src, fn, site.details["kernel"])[0]

    def _one_thread_facts(
        self, src: CudaSource, fn: ts.Node, kernel: str
    ) -> tuple[list[Precondition], list, list]:
        """(facts, row loops, stores) of a kernel one thread runs."""
        body = fn.child_by_field_name("body")
        facts: list[Precondition] = []
        one = _one_thread_launches(src, kernel)
        idx = _INDEX.search(src.text_of(body)) if body is not None else None
        facts.append(
            fact(
                "one_thread",
                one and idx is None,
                "every launch is <<<1, 1>>> and the kernel uses no thread or block index"
                if one and idx is None
                else (f"the kernel uses {idx.group(0)}" if idx else "a launch runs more than one thread"),
                "Layout",
            )
        )
        if body is None:
            return facts, [], []
        helpers = fn_texts(src)
        coop = reaches(src, body, BLOCK_COOP, helpers) or reaches(src, body, COLLECTIVE, helpers)
        facts.append(
            fact(
                "no_block_cooperation",
                not coop,
                "no shared memory, barriers, atomics or warp collectives"
                if not coop
                else "the kernel already cooperates (shared memory, barriers, atomics or warp collectives)",
                "Storage",
            )
        )
        loops, problems = self._row_loops(src, fn, body, None)
        reds = sum(len(r.reductions) for r in loops)
        facts.append(
            fact(
                "sum_max_min_reductions",
                not problems and reds > 0,
                f"{len(loops)} loop(s) over the data carrying {reds} sum/max/min reduction(s)"
                if not problems and reds
                else ("; ".join(problems) or "no loop carries a reduction"),
                "Pipeline",
            )
        )
        stores = self._stores_outside(src, fn, body, loops)
        return facts, loops, stores

    def _apply(self, src: CudaSource, site: Site) -> CudaSource:
        fn = src.node_at(site.anchor)
        assert fn is not None
        facts, loops, stores = self._one_thread_facts(src, fn, site.details["kernel"])
        if not all(f.holds for f in facts):
            raise Refused(f"{self.name}: preconditions changed under the edit")
        split = self._split(src, fn, site.details["kernel"])
        if isinstance(split, _Split):
            return self._apply_grid(src, fn, split)
        decls = T.local_decls(fn)
        edits = [
            edit.replace(
                r.loop,
                self._restride(
                    src, r, "threadIdx.x", "blockDim.x", lambda red: self._all_reduce(src, red, decls)
                ),
            )
            for r in loops
        ]
        edits += [self._guarded(src, stmt, "threadIdx.x == 0") for stmt in stores]
        for ls in T.launches_of(src, site.details["kernel"]):
            edits.append(edit.replace(T.config_nodes(src, ls)[1], str(BLOCK_THREADS)))
        # a declared bound (`__launch_bounds__(1)` on a one-thread kernel) would make the wider launch fail
        # on a GPU (cudaErrorInvalidValue): it now declares the block it gets
        k = next(k for k in src.kernels if k.name == site.details["kernel"])
        attr = next((a for a in k.attributes if a.name == "__launch_bounds__"), None)
        if attr is not None:
            edits.append(edit.Edit(attr.start, attr.end, f"__launch_bounds__({BLOCK_THREADS})"))
        return edit.apply_edits(src, edits)

    # ---- forward: one thread -> a grid of blocks and a final pass --------------------------------
    def _split(self, src: CudaSource, fn: ts.Node, kernel: str) -> _Split | str:
        """The parts of the two-pass form, or why the kernel keeps the one-block form: one loop over
        the data carrying sum/max/min reductions (each a typed local declared before it, a sum
        starting at zero), only declarations before it, a loop bound the launcher can compute, a
        kernel that is no template. What follows the loop runs once, in the final pass."""
        body = fn.child_by_field_name("body")
        k = next(k for k in src.kernels if k.name == kernel)
        facts, loops, stores = self._one_thread_facts(src, fn, kernel)
        if body is None or not all(f.holds for f in facts):
            return "preconditions of the one-block form do not hold"
        if k.template_params:
            return "a template kernel"
        if len(loops) != 1 or len(outer_loops(body)) != 1:
            return f"{len(outer_loops(body))} loops over the data (a second pass may read the first's result)"
        (r,) = loops
        if not r.reductions or any(red.kind not in ("sum", "max", "min") for red in r.reductions):
            return "the loop carries an argmax/argmin or no reduction"
        stmts = [c for c in body.named_children if c.type != "comment"]
        head = stmts[: next(i for i, c in enumerate(stmts) if c.start_byte <= r.loop.start_byte < c.end_byte)]
        if any(c.type != "declaration" or T.has_call(c, r"\w+") for c in head):
            return "statements other than plain declarations run before the loop"
        if any(T.ancestors(r.loop, body)):
            return "the loop is nested in a branch"
        decls = T.local_decls(fn)
        types = {}
        for red in r.reductions:
            d = decls.get(red.var)
            decl = d.parent if d is not None else None
            ty = decl.child_by_field_name("type") if decl is not None and decl.type == "declaration" else None
            if ty is None or decl not in head:
                return f"`{red.var}` is not a local declared before the loop"
            types[red.var] = src.text_of(ty)
        cond = r.loop.child_by_field_name("condition")
        bound = cond.child_by_field_name("right") if cond is not None else None
        if bound is None or cond.child_by_field_name("operator").type not in ("<", "<="):
            return "the loop bound is not `j < n`"
        counts = []
        for ls in T.launches_of(src, kernel):
            n = T.kernel_expr_in_launcher(src, k, ls, src.text_of(bound), fn)
            if n is None:
                return f"the launch at line {ls.line} cannot compute the loop bound"
            counts.append(n)
        return _Split(r, types, tuple(counts), stores)

    def _apply_grid(self, src: CudaSource, fn: ts.Node, sp: _Split) -> CudaSource:
        kernel = T.declarator_ident(fn.child_by_field_name("declarator")) or ""
        k = next(x for x in src.kernels if x.name == kernel)
        first = f"{kernel}_partials"
        count = f"kl_blocks_{kernel}"
        part = {red.var: f"kl_part_{kernel}_{red.var}" for red in sp.loop.reductions}
        decls = T.local_decls(fn)
        r = sp.loop

        def merge(red: Reduction, value: str) -> str:
            return (
                f"{red.var} += {value}" if red.kind == "sum" else f"{red.var} = {red.fn}({red.var}, {value})"
            )

        # the first pass: the kernel up to its loop, grid-strided, one partial per block
        def partial_stores(red: Reduction) -> list[str]:
            return self._all_reduce(src, red, decls) + [
                f"if (threadIdx.x == 0) {part[red.var]}[blockIdx.x] = {red.var};"
            ]

        loop = self._restride(
            src, r, "blockIdx.x * blockDim.x + threadIdx.x", "gridDim.x * blockDim.x", partial_stores
        )
        body = fn.child_by_field_name("body")
        ind = edit.indent_of(src, r.loop)
        head = src.text_bytes[fn.start_byte : r.loop.start_byte].decode()
        head = re.sub(rf"\b{re.escape(kernel)}(\s*\()", rf"{first}\1", head, count=1)
        head = re.sub(r"__launch_bounds__\s*\([^)]*\)", f"__launch_bounds__({BLOCK_THREADS})", head)
        partials = (
            head
            + loop
            + f"\n{ind}if (blockIdx.x == 0 && threadIdx.x == 0) {count} = gridDim.x;\n"
            + src.text_bytes[body.end_byte - 1 : fn.end_byte].decode()
        )
        # the final pass: one block folds the partials, then runs what followed the loop
        fold = [
            f"for (int kl_b = threadIdx.x; kl_b < {count}; kl_b += blockDim.x) "
            + "{ "
            + " ".join(merge(red, f"{part[red.var]}[kl_b]") + ";" for red in r.reductions)
            + " }"
        ] + [x for red in r.reductions for x in self._all_reduce(src, red, decls)]
        edits = [edit.replace(r.loop, f"\n{ind}".join(fold))]
        edits += [self._guarded(src, stmt, "threadIdx.x == 0") for stmt in sp.stores]
        globals_ = (
            "".join(
                f"__device__ {sp.types[v]} {name}[{GRID_BLOCKS}];  // one partial per block of {first}\n"
                for v, name in part.items()
            )
            + f"__device__ int {count};  // how many blocks {first} ran\n"
        )
        start = src.line_start(k.line)
        prologue = globals_ + "\n" + partials + "\n\n"
        for ls, n in zip(T.launches_of(src, kernel), sp.counts, strict=True):
            call = src.node_for(ls)
            stmt = T.statement_ancestor(call)
            cfg = T.config_nodes(src, ls)
            text = src.text_of(stmt)
            off = stmt.start_byte
            grid = f"kl_grid_blocks({n})"
            launch1 = (
                text[: cfg[0].start_byte - off]
                + grid
                + text[cfg[0].end_byte - off : cfg[1].start_byte - off]
                + str(BLOCK_THREADS)
                + text[cfg[1].end_byte - off :]
            )
            launch1 = re.sub(rf"^(\s*){re.escape(kernel)}\b", rf"\1{first}", launch1, count=1)
            launch2 = text[: cfg[1].start_byte - off] + str(BLOCK_THREADS) + text[cfg[1].end_byte - off :]
            edits.append(edit.replace(stmt, launch1 + "\n" + edit.indent_of(src, stmt) + launch2))
        helper = (
            f"static inline int kl_grid_blocks(long long n) {{  // enough {BLOCK_THREADS}-thread blocks for n, "
            f"at most {GRID_BLOCKS}\n"
            f"    long long b = (n + {BLOCK_THREADS - 1}) / {BLOCK_THREADS};\n"
            f"    return b < 1 ? 1 : (b > {GRID_BLOCKS} ? {GRID_BLOCKS} : (int)b);\n}}\n\n"
        )
        edits.append(edit.Edit(start, start, ("" if "kl_grid_blocks(" in src.text else helper) + prologue))
        attr = next((a for a in k.attributes if a.name == "__launch_bounds__"), None)
        if attr is not None:
            edits.append(edit.Edit(attr.start, attr.end, f"__launch_bounds__({BLOCK_THREADS})"))
        return edit.apply_edits(src, edits)


@dataclass(frozen=True)
class _Split:
    """The two-pass form's parts: the data loop, the reductions' types, each launch's element count
    (launcher text) and the stores that follow the loop."""

    loop: object  # warp_per_row's _RowLoop
    types: dict[str, str]
    counts: tuple[str, ...]
    stores: list


# ---- folding what the substitutions leave ---------------------------------------------------------

_CMP = {
    "==": lambda a, b: a == b,
    "!=": lambda a, b: a != b,
    "<": lambda a, b: a < b,
    ">": lambda a, b: a > b,
    "<=": lambda a, b: a <= b,
    ">=": lambda a, b: a >= b,
}


def _num(n: ts.Node | None) -> int | None:
    if n is None or n.type != "number_literal" or not re.fullmatch(r"\d+", (n.text or b"").decode()):
        return None
    return int((n.text or b"").decode())


def _fold_edit(src: CudaSource, n: ts.Node) -> edit.Edit | None:
    """One folding of node `n`, or None: integer arithmetic of literals, `x + 0`, `x * 1`,
    `0 * x` (x pure), `(lit)`, and `if` on a comparison of literals."""
    if (
        n.type == "parenthesized_expression"
        and len(n.named_children) == 1
        and n.named_children[0].type in ("number_literal", "identifier")
        and (n.parent is None or n.parent.type not in ("sizeof_expression", "call_expression"))
    ):
        return edit.replace(n, src.text_of(n.named_children[0]))
    if n.type == "binary_expression":
        left, right = n.child_by_field_name("left"), n.child_by_field_name("right")
        op = n.child_by_field_name("operator").type
        a, b = _num(left), _num(right)
        if a is not None and b is not None and op in ("+", "-", "*", "/", "%", "<<", ">>", "&", "|"):
            v = T.eval_int(f"{a} {op} {b}", {})
            if v is not None and v >= 0:
                return edit.replace(n, str(v))
        if op == "+" and a == 0 or op == "*" and a == 1:
            return edit.replace(n, src.text_of(right))
        if op in ("+", "-") and b == 0 or op in ("*", "/") and b == 1:
            return edit.replace(n, src.text_of(left))
        if op == "*" and (
            a == 0 and _PURE.fullmatch(src.text_of(right)) or b == 0 and _PURE.fullmatch(src.text_of(left))
        ):
            return edit.replace(n, "0")
    if (
        n.type == "assignment_expression"
        and n.parent is not None
        and n.parent.type == "for_statement"
        and n.child_by_field_name("operator").type == "+="
        and _num(n.child_by_field_name("right")) == 1
        and n.child_by_field_name("left").type == "identifier"
    ):
        return edit.replace(n, f"++{src.text_of(n.child_by_field_name('left'))}")
    if n.type == "if_statement" and not any(c.type == "constexpr" for c in n.children):
        cond = n.child_by_field_name("condition")
        inner = [c for c in cond.named_children if c.type != "comment"] if cond is not None else []
        e = inner[0] if len(inner) == 1 else None
        if e is not None and e.type == "binary_expression" and e.child_by_field_name("operator").type in _CMP:
            a, b = _num(e.child_by_field_name("left")), _num(e.child_by_field_name("right"))
            taken = (
                _CMP[e.child_by_field_name("operator").type](a, b)
                if a is not None and b is not None
                else None
            )
        else:
            taken = None if _num(e) is None else _num(e) != 0
        if taken is None:
            return None
        alt = n.child_by_field_name("alternative")
        keep = (
            n.child_by_field_name("consequence")
            if taken
            else (alt.named_children[-1] if alt is not None else None)
        )
        if keep is None:
            return (
                edit.delete(src, n)
                if n.parent is not None and n.parent.type == "compound_statement"
                else edit.replace(n, ";")
            )
        return edit.replace(n, src.text_of(keep))
    return None


def _fold(src: CudaSource, kernels: list[str]) -> CudaSource:
    """Fold inside `kernels` until nothing changes (outermost foldable nodes first per round)."""
    for _ in range(32):
        edits: list[edit.Edit] = []
        spans: list[tuple[int, int]] = []
        for k in [k for k in src.kernels if k.name in kernels]:
            body = src.node_for(k).child_by_field_name("body")
            for n in T.walk(body) if body is not None else []:
                if any(a <= n.start_byte < b for a, b in spans):
                    continue
                e = _fold_edit(src, n)
                if e is not None:
                    edits.append(e)
                    spans.append((n.start_byte, n.end_byte))
        if not edits:
            return src
        src = edit.apply_edits(src, edits)
    return src
