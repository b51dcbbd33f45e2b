"""One warp per row: the 32 lanes of a warp stride a row together and combine their partial
reductions with shuffles, instead of one thread walking the whole row alone.

With one thread per row, neighbouring threads read addresses N elements apart: every load of a
warp touches 32 different cache lines. With a warp per row, the lanes read 32 consecutive
elements (one or a few lines per load) and the row's loop-carried sums, maxima and minima become
per-lane partials merged by a butterfly of `__shfl_xor_sync` after the loop (every lane ends
with the same value, so what follows the loop runs unchanged on every lane). Writes of per-row
results are left to lane 0; element-wise writes inside a row loop are already one lane each.

Forward (`apply`), on a thread-per-row kernel: `row = blockIdx.x * blockDim.x + threadIdx.x`
becomes `(...) / 32`, a `lane` index is declared, every row loop `for (j = A; j < B; ++j)` starts
at `A + lane` and steps by 32, a shuffle all-reduce follows each loop for each reduction it
carries, stores outside the loops are guarded by `lane == 0`, and every launch multiplies its
grid by 32 (same block size, 32 times the threads: one warp per former thread).

Backward (`remove`), on a warp-per-row kernel (`lane = threadIdx.x & 31`, `row = ... +
threadIdx.x / 32`, lane-strided loops, warp reductions `v = reduce(v)`): the lane becomes 0, the
loops step by 1, the reductions go, the row is the global thread index and every launch divides
its grid by 32 (rounding up).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import tree_sitter as ts

from klineage.deopt import _threads as T
from klineage.deopt import _warp_index as WI
from klineage.deopt.base import LaunchValues, Operator, Precondition, Refused, Site
from klineage.deopt.row_shape import MAX_WARP_ROW, MIN_WARP_ROW, RowShape, row_shapes
from klineage.deopt.rows import (
    BLOCK_COOP,
    COLLECTIVE,
    WARP,
    Reduction,
    base_name,
    fact,
    fn_texts,
    is_pointer,
    outer_loops,
    reaches,
    warp_butterfly,
    write_target,
)
from klineage.source import edit
from klineage.source.model import CudaSource
from klineage.source.syntax import unparenthesized

#: the row a thread owns after the removal (the global thread index)
_THREAD_ROW = "blockIdx.x * blockDim.x + threadIdx.x"
#: combining functions of max/min reductions, and which kind each is
_MAXMIN = {"fmaxf": "max", "fmax": "max", "max": "max", "fminf": "min", "fmin": "min", "min": "min"}


@dataclass(frozen=True)
class _RowLoop:
    loop: ts.Node
    var: str
    init: ts.Node  # the loop variable's start value
    update: ts.Node
    reductions: tuple[Reduction, ...]
    step: str = "1"  # what the loop adds per iteration (a name or number; "1" for ++j)


@dataclass
class _Facts:
    """The analysis of one kernel: the preconditions and, when all hold, what the edit needs."""

    kernel: str
    facts: list[Precondition]
    row_value: ts.Node | None = None
    row_stmt: ts.Node | None = None
    loops: tuple[_RowLoop, ...] = ()
    stores: tuple[ts.Node, ...] = ()
    lane_value: ts.Node | None = None
    lane: str = ""
    strided: tuple[ts.Node, ...] = ()  # backward: the lane-strided loops
    collectives: tuple[ts.Node, ...] = ()  # backward: the reduction statements to delete
    warp_indices: tuple[ts.Node, ...] = ()  # backward: reads of the warp's index outside the row

    @property
    def ok(self) -> bool:
        return all(f.holds for f in self.facts)


def _launch_facts(src: CudaSource, kernel: str) -> list[Precondition]:
    launches = T.launches_of(src, kernel)
    if not launches:
        return [
            fact(
                "launch_in_file",
                False,
                f"no launch of {kernel} in this file: its grid cannot be rescaled",
                "Layout",
            )
        ]
    consts = T.file_constants(src)
    bad_block, bad_grid = [], []
    for ls in launches:
        cfg = T.config_nodes(src, ls)
        launcher = T.enclosing_launcher(src, ls)
        if len(cfg) < 2 or launcher is None:
            bad_block.append(f"line {ls.line}: no block size")
            continue
        block = T.eval_int(T.resolve_local(src, launcher, src.text_of(cfg[1])), consts)
        if block is None or block % WARP:
            bad_block.append(
                f"line {ls.line}: block '{src.text_of(cfg[1])}'" + (f" = {block}" if block else "")
            )
        grid = T.resolve_local(src, launcher, src.text_of(cfg[0]))
        if "dim3" in grid or "{" in grid or "," in T.squash(src.text_of(cfg[0])):
            bad_grid.append(f"line {ls.line}: grid '{src.text_of(cfg[0])}'")
    return [
        fact("launch_in_file", True, f"{len(launches)} launch(es) of {kernel} in this file", "Layout"),
        fact(
            "block_multiple_of_warp",
            not bad_block,
            "every launch's block is a whole number of warps"
            if not bad_block
            else "block size not a known multiple of 32 (" + "; ".join(bad_block) + ")",
            "Layout",
        ),
        fact(
            "grid_1d",
            not bad_grid,
            "every launch uses a one-dimensional grid"
            if not bad_grid
            else "grid is not a plain 1-D count (" + "; ".join(bad_grid) + ")",
            "Layout",
        ),
    ]


def _owns_its_row(src: CudaSource, body: ts.Node, row: str) -> Precondition:
    """A thread index divided by (or taken modulo) the extent of a row loop is an element of a
    row, not a row: the N threads of a row would each become a warp or block that repeats the
    row's loops (softmax_bf16_short: a warp per element of 100-element rows, 5x slower than
    naive on the H200). Only a thread that owns its row gives the lanes disjoint work."""
    extents = set()
    for loop in outer_loops(body):
        parts = T.counting_loop(src, loop, True)
        if parts is not None and (bound := parts[2].child_by_field_name("right")) is not None:
            extents.add(T.strip_casts(T.squash(src.text_of(bound))))
    split = next(
        (
            n
            for n in T.walk(body)
            if n.type == "binary_expression"
            and n.child_by_field_name("operator").type in ("/", "%")
            and T.strip_casts(T.squash(src.text_of(n.child_by_field_name("left")))) == row
            and T.strip_casts(T.squash(src.text_of(n.child_by_field_name("right")))) in extents
        ),
        None,
    )
    return fact(
        "thread_owns_its_row",
        split is None,
        f"`{row}` indexes whole rows (it is never split by a row loop's extent)"
        if split is None
        else f"`{row}` is an element of a row ({T.squash(src.text_of(split))}, line {split.start_point.row + 1}): "
        "the row's threads would each take a warp or block and repeat the row's loops",
        "Layout",
    )


def _index_uses(src: CudaSource, body: ts.Node, allowed: tuple[ts.Node, ...]) -> list[ts.Node]:
    """Uses of threadIdx/blockIdx/blockDim in `body` outside the `allowed` expressions."""
    return [
        n
        for n in T.walk(body)
        if n.type == "field_expression"
        and re.fullmatch(r"(threadIdx|blockIdx|blockDim)\.\w", T.squash(src.text_of(n)))
        and not any(a.start_byte <= n.start_byte < a.end_byte for a in allowed)
    ]


def _row_locals(src: CudaSource, body: ts.Node, row: ts.Node, assigned: set[str]) -> dict[str, ts.Node]:
    """name -> initializer of the never-written locals the row's value names (`warpsPerBlock =
    blockDim.x / warpSize`): read only where the row is, which the removal rewrites."""
    names = {n.text.decode() for n in T.walk(row) if n.type == "identifier" and n.text} - assigned
    return {
        nm: v
        for d in T.walk(body)
        if d.type == "init_declarator"
        and (nm := T.declarator_ident(d) or "") in names
        and (v := d.child_by_field_name("value")) is not None
    }


def _is_plus(n: ts.Node | None) -> bool:
    return n is not None and n.type == "binary_expression" and n.child_by_field_name("operator").type == "+"


def _sum_terms(n: ts.Node) -> list[ts.Node]:
    """The terms of `a + b + c` (left-nested binary `+`), in order."""
    if not _is_plus(n):
        return [n]
    return _sum_terms(n.child_by_field_name("left")) + _sum_terms(n.child_by_field_name("right"))


def _is_zero(text: str) -> bool:
    t = re.sub(r"static_cast<\w+>|\((float|double|int)\)", "", T.squash(text)).strip("()")
    return re.fullmatch(r"0*\.?0*[fFlL]?|0x0+", t) is not None and any(c == "0" for c in t)


def _reduction_of(src: CudaSource, stmt: ts.Node, var: str) -> Reduction | None:
    """The reduction an update statement performs on `var`, if it has one of the known forms."""
    t = T.squash(src.text_of(stmt)).rstrip(";")
    v = re.escape(var)
    rest = None
    if m := re.fullmatch(rf"{v}\+=(.+)", t):
        rest, kind, fn = m.group(1), "sum", ""
    elif m := re.fullmatch(rf"{v}={v}\+(.+)", t):
        rest, kind, fn = m.group(1), "sum", ""
    elif m := re.fullmatch(rf"{v}=fmaf?\((.+),{v}\)", t):
        rest, kind, fn = m.group(1), "sum", ""
    elif m := re.fullmatch(rf"{v}=(\w+)\({v},(.+)\)", t):
        if m.group(1) in _MAXMIN:
            rest, kind, fn = m.group(2), _MAXMIN[m.group(1)], m.group(1)
    elif m := re.fullmatch(rf"{v}=(\w+)\((.+),{v}\)", t):
        if m.group(1) in _MAXMIN:
            rest, kind, fn = m.group(2), _MAXMIN[m.group(1)], m.group(1)
    if rest is None or re.search(rf"(?<![\w.]){v}(?!\w)", rest):
        return None
    return Reduction(var, kind, fn)


def _decl_node(fn: ts.Node, name: str) -> ts.Node | None:
    return next(
        (
            d
            for d in T.walk(fn)
            if d.type in ("init_declarator", "identifier")
            and d.parent is not None
            and d.parent.type == "declaration"
            and T.declarator_ident(d) == name
        ),
        None,
    )


def _aliased(src: CudaSource, fn: ts.Node, name: str) -> set[str]:
    """The names a local pointer is derived from (`xr` in `const float* xr = x + row * N;`)."""
    decl = _decl_node(fn, name)
    value = decl.child_by_field_name("value") if decl is not None and decl.type == "init_declarator" else None
    return {n.text.decode() for n in T.walk(value) if n.type == "identifier" and n.text} if value else set()


class WarpPerRow(Operator):
    name = "warp_per_row"
    category = "tiling"
    intent = (
        "Give each row a warp instead of a thread: lanes stride the row (coalesced loads), "
        "partial sums/maxima/minima are merged with a shuffle all-reduce, lane 0 stores per-row results."
    )
    mechanical_apply = True
    #: whether row loops may step by a loop-invariant S (`j += W`); the warp's backward step
    #: recognizes only lane loops stepping by 32, so its forward keeps to unit steps
    strides_steps = False
    #: whether a sequential loop around row loops (k passes of a selection) may carry state from
    #: pass to pass; the warp's all-reduce leaves every reduced value the same in every lane
    pass_loops = True

    # ---- analysis: thread per row (forward) --------------------------------------------------
    def _thread_per_row(self, src: CudaSource, fn: ts.Node, kernel: str) -> _Facts:
        body = fn.child_by_field_name("body")
        out = _Facts(kernel, [])
        if body is None:
            out.facts.append(fact("one_thread_per_row", False, "kernel has no body", "Layout"))
            return out
        text = src.text_of(body)
        rows = [
            d
            for d in T.walk(body)
            if d.type == "init_declarator"
            and d.child_by_field_name("value") is not None
            and T.global_tid(src.text_of(d.child_by_field_name("value"))) == "blockDim.x"
        ]
        row = T.declarator_ident(rows[0]) if len(rows) == 1 else None
        if row is None or row in T.assigned_in(fn):
            out.facts.append(
                fact(
                    "one_thread_per_row",
                    False,
                    "no single never-reassigned `row = blockIdx.x * blockDim.x + threadIdx.x`",
                    "Layout",
                )
            )
            return out
        value = rows[0].child_by_field_name("value")
        others = _index_uses(src, body, (value,))
        guard = next(
            (
                s
                for s in body.named_children
                if s.type == "if_statement"
                and T.uses_ident(s.child_by_field_name("condition"), row)
                and T.squash(src.text_of(s.child_by_field_name("consequence"))) in ("return;", "{return;}")
            ),
            None,
        )
        out.row_value, out.row_stmt = value, T.statement_ancestor(rows[0])
        out.facts.append(
            fact(
                "one_thread_per_row",
                not others and guard is not None,
                f"`{row}` is the global thread index, the only use of thread/block indices, and threads past the last "
                "row return"
                if not others and guard is not None
                else (
                    f"thread or block index used beyond `{row}` (line {others[0].start_point.row + 1})"
                    if others
                    else f"no `if (... {row} ...) return;` guard for threads past the last row"
                ),
                "Layout",
            )
        )
        helpers = fn_texts(src)
        coop = reaches(src, body, BLOCK_COOP, helpers) or reaches(src, body, COLLECTIVE, helpers)
        out.facts.append(
            fact(
                "no_block_cooperation",
                not coop,
                "no shared memory, barriers, atomics or warp collectives: each row is one thread's"
                if not coop
                else "the kernel already cooperates (shared memory, barriers, atomics or warp collectives)",
                "Storage",
            )
        )
        loops, problems = self._row_loops(src, fn, body, guard)
        out.loops = tuple(loops)
        out.facts.append(
            fact(
                "rows_independent",
                not problems and bool(loops),
                f"{len(loops)} row loop(s); loop-carried state only in sum/max/min reductions"
                if not problems and loops
                else ("; ".join(problems) or "no loop over the row"),
                "Pipeline",
            )
        )
        out.facts.append(_owns_its_row(src, body, row))
        out.stores = tuple(self._stores_outside(src, fn, body, loops))
        if re.search(r"\blane\b", text) and "kl_lane" in text:
            out.facts.append(fact("lane_name_free", False, "both `lane` and `kl_lane` are taken", "Layout"))
        out.facts += _launch_facts(src, kernel)
        return out

    def _row_loops(
        self, src: CudaSource, fn: ts.Node, body: ts.Node, guard: ts.Node | None
    ) -> tuple[list[_RowLoop], list[str]]:
        loops, problems = [], []
        for loop in outer_loops(body):
            got, why = self._row_loop(src, fn, body, guard, loop)
            body_of = loop.child_by_field_name("body")
            if why and self.pass_loops and body_of is not None and outer_loops(body_of):
                inner, why = self._pass_loop(src, fn, body, guard, loop)
                if not why:
                    loops += inner
                    continue
            if got is not None:
                loops.append(got)
            problems += why
        return loops, problems

    def _row_loop(
        self, src: CudaSource, fn: ts.Node, body: ts.Node, guard: ts.Node | None, loop: ts.Node
    ) -> tuple[_RowLoop | None, list[str]]:
        """`loop` as a row loop the lanes can stride, or why not."""
        line = loop.start_point.row + 1
        parts = T.counting_loop(src, loop, self.strides_steps)
        path = T.ancestors(loop, body)
        if parts is None:
            step = "j += S)`" if self.strides_steps else "++j)`"
            return None, [f"line {line}: not a counting loop `for (int j = A; j < B; {step}"]
        if any(a.type not in ("compound_statement", "if_statement", "else_clause") for a in path):
            return None, [f"line {line}: loop nested in a {path[0].type}"]
        if guard is not None and loop.start_byte < guard.start_byte:
            return None, [f"line {line}: loop before the row guard"]
        var, init, cond, update, step = parts
        lbody = loop.child_by_field_name("body")
        bound = cond.child_by_field_name("right")
        if lbody is None or T.jumps_out(loop):
            return None, [f"line {line}: the loop leaves early (break/continue/return)"]
        inner = set(T.local_decls(loop))
        if var in T.assigned_in(lbody) or T.assigned_in(bound) or T.assigned_in(init):
            return None, [f"line {line}: the loop variable or bound changes inside the loop"]
        reds, why = self._reductions(src, fn, loop, lbody, inner)
        why += self._row_contiguous(src, fn, lbody, var)
        why += self._element_writes(src, fn, lbody, inner | {var})
        if why:
            return None, [f"line {line}: {w}" for w in why]
        return _RowLoop(loop, var, init, update, tuple(reds), step), []

    def _pass_loop(
        self, src: CudaSource, fn: ts.Node, body: ts.Node, guard: ts.Node | None, loop: ts.Node
    ) -> tuple[list[_RowLoop], list[str]]:
        """`loop` as a sequential pass loop around row loops (k passes of a selection): every
        lane runs every pass, the row loops inside are strided and all-reduced, so whatever the
        pass carries to the next one is computed from reduced values and is the same in every
        lane. Needs each reduced value declared in the pass (fresh per pass: a sum carried over
        passes would be re-added by 32 lanes) and no pass-level store to memory the row loops read
        (lane 0 stores it; the other lanes would not see it)."""
        line = loop.start_point.row + 1
        parts = T.counting_loop(src, loop, False)
        pbody = loop.child_by_field_name("body")
        path = T.ancestors(loop, body)
        if parts is None or pbody is None:
            return [], [f"line {line}: not a counting pass loop"]
        if any(a.type not in ("compound_statement", "if_statement", "else_clause") for a in path):
            return [], [f"line {line}: pass loop nested in a {path[0].type}"]
        if (guard is not None and loop.start_byte < guard.start_byte) or T.jumps_out(loop):
            return [], [f"line {line}: pass loop before the row guard or leaving early"]
        var, init, cond, _, _ = parts
        if (
            var in T.assigned_in(pbody)
            or T.assigned_in(cond.child_by_field_name("right"))
            or T.assigned_in(init)
        ):
            return [], [f"line {line}: the pass variable or bound changes inside the loop"]
        inner_loops = outer_loops(pbody)
        if not inner_loops:
            return [], [f"line {line}: no row loop inside the pass loop"]
        fresh = set(T.local_decls(pbody))
        out, why = [], []
        for il in inner_loops:
            got, w = self._row_loop(src, fn, pbody, None, il)
            why += w
            if got is None:
                continue
            stale = [x for r in got.reductions for x in (r.var, r.index) if x and x not in fresh]
            if stale:
                why.append(f"line {line}: `{stale[0]}` is reduced in every pass but not declared in the pass")
            out.append(got)
        spans = [(il.start_byte, il.end_byte) for il in inner_loops]
        stored = {
            base_name(left) or ""
            for n in T.walk(pbody)
            if n.type in ("assignment_expression", "update_expression")
            and not any(a <= n.start_byte < b for a, b in spans)
            and (left := write_target(n)) is not None
            and left.type != "identifier"
        }
        read = {
            base_name(n) or "" for il in inner_loops for n in T.walk(il) if n.type == "subscript_expression"
        }
        read |= {a for b in read for a in _aliased(src, fn, b)}
        if stored & read:
            why.append(
                f"line {line}: the pass stores to `{sorted(stored & read)[0]}`, which its row loops read"
            )
        return out, why

    def _reductions(
        self, src: CudaSource, fn: ts.Node, loop: ts.Node, lbody: ts.Node, inner: set[str]
    ) -> tuple[list[Reduction], list[str]]:
        reds, why = [], []
        pairs = _arg_pairs(src, lbody, self.pass_loops)
        for red, _ in pairs.values():
            reds.append(red)
        paired = {n for red, _ in pairs.values() for n in (red.var, red.index)}
        for name in sorted(T.assigned_in(lbody) - inner - paired):
            writes = [
                n
                for n in T.walk(lbody)
                if n.type in ("assignment_expression", "update_expression")
                and T.squash(src.text_of(write_target(n))) == name
            ]
            stmts = {T.statement_ancestor(w).start_byte: T.statement_ancestor(w) for w in writes}
            red = _reduction_of(src, next(iter(stmts.values())), name) if len(stmts) == 1 else None
            if red is None:
                why.append(f"`{name}` is carried across iterations but is not a sum/max/min reduction")
                continue
            (stmt,) = stmts.values()
            reads = [
                n
                for n in T.walk(lbody)
                if n.type == "identifier"
                and n.text == name.encode()
                and not (stmt.start_byte <= n.start_byte < stmt.end_byte)
            ]
            if reads:
                why.append(
                    f"`{name}` is read inside the loop (line {reads[0].start_point.row + 1}): a running value, "
                    "not a reduction"
                )
                continue
            if red.kind == "sum":
                decl = _decl_node(fn, name)
                value = (
                    decl.child_by_field_name("value")
                    if decl is not None and decl.type == "init_declarator"
                    else None
                )
                earlier = [
                    n
                    for n in T.walk(fn)
                    if n.type in ("assignment_expression", "update_expression")
                    and decl is not None
                    and decl.end_byte < n.start_byte < loop.start_byte
                    and T.squash(src.text_of(write_target(n))) == name
                    and not _exclusive(n, loop)
                ]
                if value is None or not _is_zero(src.text_of(value)) or earlier:
                    why.append(
                        f"the sum `{name}` does not start from zero at the loop: the per-lane partials would "
                        "count its start value 32 times"
                    )
                    continue
            reds.append(red)
        return reds, why

    def _row_contiguous(self, src: CudaSource, fn: ts.Node, lbody: ts.Node, var: str) -> list[str]:
        """The loop must walk memory along the row: every pointer access that moves with the
        loop variable moves by one element per iteration. (A loop over a column, `x[j * N + c]`,
        is already coalesced across threads; lanes striding it would scatter the warp.)"""
        unit, strided = 0, []
        for n in T.walk(lbody):
            if n.type != "subscript_expression" or not is_pointer(fn, base_name(n) or ""):
                continue
            idx = T.squash(src.text_of(n)[len(src.text_of(n.child_by_field_name("argument") or n)) :])
            if not re.search(rf"(?<![\w.]){re.escape(var)}(?!\w)", idx):
                continue
            if re.fullmatch(rf"\[(?:.*[+(])?{re.escape(var)}(?:[+)].*)?\]", idx) and not re.search(
                rf"[*/%]\(?{re.escape(var)}\b|\b{re.escape(var)}\)?[*/%<>]", idx
            ):
                unit += 1
            else:
                strided.append(f"`{T.squash(src.text_of(n))}` (line {n.start_point.row + 1})")
        if strided:
            return [
                f"access {strided[0]} does not move one element per iteration: the loop does not walk a row"
            ]
        if not unit:  # accesses through helpers: `load(p + j)`, `load<V>(p, j)`
            for n in T.walk(lbody):
                parts = (
                    _sum_terms(n)
                    if _is_plus(n) and not _is_plus(n.parent)
                    else T.call_args(n)
                    if n.type == "call_expression"
                    else []
                )
                ptrs = [
                    a
                    for a in parts
                    if a is not None and a.type == "identifier" and is_pointer(fn, src.text_of(a))
                ]
                rest = [T.squash(src.text_of(a)) for a in parts if a is not None and a not in ptrs]
                if ptrs and any(re.fullmatch(rf"(?:.*[+(])?{re.escape(var)}(?:[+)].*)?", r) for r in rest):
                    unit += 1
        return [] if unit else ["no memory access walks along the row"]

    def _element_writes(
        self, src: CudaSource, fn: ts.Node, lbody: ts.Node, per_element: set[str]
    ) -> list[str]:
        """Stores in a row loop must go to memory, at an element of this iteration (index uses the
        loop variable or a value declared in the loop), so each lands on exactly one lane. A local
        array written in the loop would hold only this lane's elements afterwards."""
        why = []
        inner = set(T.local_decls(lbody))
        for n in T.walk(lbody):
            if n.type not in ("assignment_expression", "update_expression"):
                continue
            left = write_target(n)
            if left is None or left.type == "identifier":
                continue
            base = base_name(left) or ""
            pointer = is_pointer(fn, base)
            if base in inner and not pointer:
                continue  # a value of this iteration
            if left.type == "subscript_expression" and pointer:
                idx = left.child_by_field_name("indices") or left.child_by_field_name("index")
                idx = idx if idx is not None else left.named_children[-1]
                if any(T.uses_ident(idx, v) for v in per_element):
                    continue
            why.append(
                f"store `{T.squash(src.text_of(left))}` (line {n.start_point.row + 1}) is not to this "
                "iteration's element"
            )
        return why

    def _stores_outside(
        self, src: CudaSource, fn: ts.Node, body: ts.Node, loops: list[_RowLoop]
    ) -> list[ts.Node]:
        """Statements outside the row loops that store through a pointer (per-row results): lane 0
        does them. Local arrays and structs are every lane's own copy and stay unguarded."""
        spans = [(r.loop.start_byte, r.loop.end_byte) for r in loops]
        out: dict[int, ts.Node] = {}
        for n in T.walk(body):
            if n.type not in ("assignment_expression", "update_expression"):
                continue
            left = write_target(n)
            if left is None or left.type == "identifier" or any(a <= n.start_byte < b for a, b in spans):
                continue
            if not is_pointer(fn, base_name(left) or ""):
                continue
            stmt = T.statement_ancestor(n)
            out[stmt.start_byte] = stmt
        return list(out.values())

    # ---- analysis: warp per row (backward) ---------------------------------------------------
    def _warp_per_row(self, src: CudaSource, fn: ts.Node, kernel: str) -> _Facts | None:
        body = fn.child_by_field_name("body")
        if body is None:
            return None
        consts = T.file_constants(src)
        warps = WI.warp_locals(src, body)
        lane = row = None
        for d in T.walk(body):
            if d.type != "init_declarator" or d.child_by_field_name("value") is None:
                continue
            v = d.child_by_field_name("value")
            t = T.strip_casts(src.text_of(v))
            if (m := re.fullmatch(r"\(?threadIdx\.x([&%])\(?(.+?)\)?\)?", t)) and lane is None:
                val = T.eval_int(m.group(2), consts)
                if val == (WARP - 1 if m.group(1) == "&" else WARP):
                    lane = (T.declarator_ident(d), v)
            elif row is None and _warp_row(T.subst_idents(t, {k: "threadIdx.x/32" for k in warps}), consts):
                row = (T.declarator_ident(d), v)
        if lane is None or row is None:
            return None
        out = _Facts(kernel, [], row_value=row[1], lane_value=lane[1], lane=lane[0] or "")
        assigned = T.assigned_in(fn)
        out.warp_indices = tuple(
            n
            for n in WI.warp_index_nodes(src, body)
            if not row[1].start_byte <= n.start_byte < row[1].end_byte
        )
        row_locals = _row_locals(src, body, row[1], assigned)
        others = _index_uses(src, body, (lane[1], row[1], *out.warp_indices, *row_locals.values()))
        if out.warp_indices:
            spelled = T.subst_idents(
                T.squash(src.text_of(row[1])),
                {k: T.paren(T.squash(src.text_of(v))) for k, v in row_locals.items()},
            )
            whole = WI.rows_by_block_warps(T.strip_casts(spelled))
            out.facts.append(
                fact(
                    "warp_index_of_the_row",
                    whole,
                    f"the warp's index is read beyond the row (line {out.warp_indices[0].start_point.row + 1}); "
                    + (
                        "a block holds blockDim.x / 32 rows, so it is the row modulo that count"
                        if whole
                        else f"`{spelled}` is not a block of blockDim.x / 32 rows: the index cannot be recovered from the row"
                    ),
                    "Layout",
                )
            )
        fixed = lane[0] not in assigned and row[0] not in assigned and not others
        out.facts.append(
            fact(
                "one_warp_per_row",
                fixed,
                f"`{row[0]}` is the warp's global index and `{lane[0]}` its lane, the only uses of "
                "thread/block indices"
                if fixed
                else "the lane or row index is reassigned, or thread/block indices are used elsewhere",
                "Layout",
            )
        )
        strided, bad = [], []
        for n in T.walk(body):
            if (
                n.type != "identifier"
                or n.text != lane[0].encode()
                or lane[1].start_byte <= n.start_byte < lane[1].end_byte
            ):
                continue
            p = n.parent
            if p is not None and p.type == "init_declarator" and T.declarator_ident(p) == lane[0]:
                continue
            loop = _strided_loop_of(src, n, consts)
            if loop is not None:
                strided.append(loop)
            elif not _lane_zero_test(src, n):
                bad.append(n.start_point.row + 1)
        out.strided = tuple(strided)
        out.facts.append(
            fact(
                "lane_only_strides",
                not bad and bool(strided),
                f"`{lane[0]}` only starts {len(strided)} loop(s) striding the row by 32 and picks "
                "lane 0 for stores"
                if not bad and strided
                else (
                    f"`{lane[0]}` also indexes data (line {bad[0]}): each lane owns more than a stride"
                    if bad
                    else "no loop strides the row by the warp"
                ),
                "Layout",
            )
        )
        helpers = fn_texts(src)
        colls, stray = [], []
        for stmt in [s for s in T.walk(body) if s.type in ("expression_statement", "for_statement")]:
            if any(a.start_byte <= stmt.start_byte < a.end_byte for a in colls):
                continue
            if _warp_reduction_stmt(src, stmt, helpers):
                colls.append(stmt)
        for n in T.walk(body):
            if (
                n.type in ("expression_statement", "declaration", "return_statement")
                and reaches(src, n, COLLECTIVE, helpers)
                and not any(c.start_byte <= n.start_byte < c.end_byte for c in colls)
            ):
                stray.append(n.start_point.row + 1)
        out.collectives = tuple(colls)
        out.facts.append(
            fact(
                "reductions_only_collectives",
                not stray,
                f"{len(colls)} warp reduction(s) `v = reduce(v)`, no other warp collective"
                if not stray
                else f"a warp collective other than a reduction `v = reduce(v)` (line {stray[0]})",
                "Pipeline",
            )
        )
        coop = reaches(
            src,
            body,
            BLOCK_COOP,
            {k: v for k, v in helpers.items() if not any(k in src.text_of(c) for c in colls)},
        )
        out.facts.append(
            fact(
                "no_block_cooperation",
                not coop,
                "no shared memory, barriers or atomics beyond the warp"
                if not coop
                else "the block cooperates beyond the warp (shared memory, barriers or atomics)",
                "Storage",
            )
        )
        out.facts += _launch_facts(src, kernel)
        return out

    # ---- operator interface ------------------------------------------------------------------
    def _kernels(self, src: CudaSource) -> list[tuple[str, ts.Node]]:
        return [(k.name, src.node_for(k)) for k in src.kernels]

    def find(self, src: CudaSource) -> list[Site]:
        sites = []
        for name, fn in self._kernels(src):
            f = self._warp_per_row(src, fn, name)
            if f is not None:
                sites.append(self.site(src, fn, f"kernel {name}: one warp per row", kernel=name))
        return sites

    def removal_preconditions(self, src: CudaSource, site: Site) -> list[Precondition]:
        fn = src.node_at(site.anchor)
        f = self._warp_per_row(src, fn, site.details["kernel"]) if fn is not None else None
        if f is None:
            return [
                fact("one_warp_per_row", False, "no lane/row index of a warp-per-row kernel here", "Layout")
            ]
        return f.facts

    def _remove(self, src: CudaSource, site: Site) -> CudaSource:
        fn = src.node_at(site.anchor)
        assert fn is not None
        f = self._warp_per_row(src, fn, site.details["kernel"])
        assert f is not None and f.row_value is not None and f.lane_value is not None
        edits = [
            edit.replace(f.lane_value, "0"),
            edit.replace(f.row_value, _THREAD_ROW),
        ]
        for loop in f.strided:
            init = loop.child_by_field_name("initializer").children_by_field_name("declarator")[0]
            value = init.child_by_field_name("value")
            lane = f.lane
            start = T.squash(src.text_of(value))
            new = (
                "0"
                if start == lane
                else re.sub(
                    rf"\s*\+\s*{re.escape(lane)}\b|\b{re.escape(lane)}\s*\+\s*", "", src.text_of(value)
                )
            )
            edits += [
                edit.replace(value, new),
                edit.replace(
                    loop.child_by_field_name("update"),
                    f"++{T.decl_name(loop.child_by_field_name('initializer'))}",
                ),
            ]
        for stmt in f.collectives:
            if stmt.parent is not None and stmt.parent.type == "compound_statement":
                edits.append(edit.delete(src, stmt))
            else:
                edits.append(edit.replace(stmt, ";"))
        for n in f.warp_indices:
            edits.append(edit.replace(n, WI.row_warp_index(_THREAD_ROW)))
        for ls in T.launches_of(src, site.details["kernel"]):
            grid = T.config_nodes(src, ls)[0]
            edits.append(edit.replace(grid, T.ceil_div(src.text_of(grid), str(WARP))))
        return edit.apply_edits(src, edits)

    def find_forward(self, src: CudaSource) -> list[Site]:
        sites = []
        for name, fn in self._kernels(src):
            body = fn.child_by_field_name("body")
            if body is None or not outer_loops(body):
                continue
            if any(
                T.global_tid(src.text_of(d.child_by_field_name("value"))) == "blockDim.x"
                for d in T.walk(body)
                if d.type == "init_declarator" and d.child_by_field_name("value") is not None
            ):
                sites.append(self.site(src, fn, f"kernel {name}: one thread per row", kernel=name))
        return sites

    def preconditions(self, src: CudaSource, site: Site) -> list[Precondition]:
        fn = src.node_at(site.anchor)
        if fn is None:
            return [fact("one_thread_per_row", False, "the kernel is not at this anchor", "Layout")]
        return self._thread_per_row(src, fn, site.details["kernel"]).facts

    def shape_preconditions(
        self, src: CudaSource, site: Site, bench: Sequence[LaunchValues]
    ) -> list[Precondition]:
        """A warp fits rows between a few elements and a few hundred a lane (row_shape's rule):
        rows shorter than MIN_WARP_ROW at every bench size keep a thread per row (most lanes
        would idle), rows longer than MAX_WARP_ROW at every bench size take a block per row."""
        shapes = self._row_shapes(src, site, bench)
        if not shapes:
            return []
        lengths = sorted({s.length for s in shapes})
        facts = []
        if lengths[-1] < MIN_WARP_ROW:
            facts.append(
                fact(
                    "row_reaches_a_warp",
                    False,
                    f"rows of {', '.join(map(str, lengths))} at the bench sizes, under {MIN_WARP_ROW} "
                    f"elements: a warp would idle most of its {WARP} lanes; a thread per row fits",
                    "Layout",
                )
            )
        if lengths[0] > MAX_WARP_ROW:
            facts.append(
                fact(
                    "row_fits_a_warp",
                    False,
                    f"rows of {', '.join(map(str, lengths))} at the bench sizes, over {MAX_WARP_ROW} "
                    f"elements ({MAX_WARP_ROW // WARP} a lane): a block per row streams them",
                    "Layout",
                )
            )
        return facts

    def _row_shapes(
        self, src: CudaSource, site: Site, bench: Sequence[LaunchValues]
    ) -> list[RowShape] | None:
        """Per launch and bench size, the launch's block and the longest row (None: not judged)."""
        fn = src.node_at(site.anchor)
        info = src.kernel(site.details.get("kernel", ""))
        if fn is None or info is None or not bench:
            return None
        loops = [r.loop for r in self._thread_per_row(src, fn, info.name).loops]
        return row_shapes(src, fn, info, loops, bench)

    def _apply(self, src: CudaSource, site: Site) -> CudaSource:
        fn = src.node_at(site.anchor)
        assert fn is not None
        f = self._thread_per_row(src, fn, site.details["kernel"])
        if not f.ok:
            raise Refused(f"{self.name}: preconditions changed under the edit")
        assert f.row_value is not None and f.row_stmt is not None
        lane = "kl_lane" if re.search(r"\blane\b", src.text_of(fn)) else "lane"
        ind = edit.indent_of(src, f.row_stmt)
        edits = [
            edit.replace(f.row_value, f"({src.text_of(f.row_value)}) / {WARP}"),
            edit.insert_after(f.row_stmt, f"\n{ind}const int {lane} = threadIdx.x & {WARP - 1};"),
        ]
        for r in f.loops:
            edits.append(edit.replace(r.loop, self._strided_loop(src, r, lane)))
        edits += [self._guarded(src, stmt, f"{lane} == 0") for stmt in f.stores]
        for ls in T.launches_of(src, site.details["kernel"]):
            grid = T.config_nodes(src, ls)[0]
            edits.append(edit.replace(grid, f"{T.paren(src.text_of(grid))} * {WARP}"))
        return edit.apply_edits(src, edits)

    def _strided_loop(self, src: CudaSource, r: _RowLoop, lane: str) -> str:
        return self._restride(src, r, lane, str(WARP), warp_butterfly)

    @staticmethod
    def _restride(
        src: CudaSource, r: _RowLoop, rank: str, step: str, reduce: Callable[[Reduction], list[str]]
    ) -> str:
        """Row loop `r` started at `A + rank` and stepped by `step`, followed by the all-reduce
        lines of each reduction it carries (braced when the loop was a lone statement)."""
        init, upd = r.init, r.update
        text = src.text_bytes
        start = src.text_of(init)
        first = rank if r.step == "1" else f"{rank} * {r.step}"
        new_init = first if T.squash(start) == "0" else f"{start} + {first}"
        stride = step if r.step == "1" else f"{step} * {r.step}"
        loop = (
            text[r.loop.start_byte : init.start_byte].decode()
            + new_init
            + text[init.end_byte : upd.start_byte].decode()
            + f"{r.var} += {stride}"
            + text[upd.end_byte : r.loop.end_byte].decode()
        )
        if not r.reductions:
            return loop
        ind = edit.indent_of(src, r.loop)
        lines = [loop] + [x for red in r.reductions for x in reduce(red)]
        braced = r.loop.parent is not None and r.loop.parent.type == "compound_statement"
        return (
            f"\n{ind}".join(lines)
            if braced
            else "{\n" + ind + "    " + f"\n{ind}    ".join(lines) + "\n" + ind + "}"
        )

    @staticmethod
    def _guarded(src: CudaSource, stmt: ts.Node, cond: str) -> edit.Edit:
        """`stmt` done by one thread of the row's group only."""
        text = f"if ({cond}) {src.text_of(stmt)}"
        braced = stmt.parent is not None and stmt.parent.type == "compound_statement"
        return edit.replace(stmt, text if braced else "{ " + text + " }")


#: the argmax/argmin butterfly `apply` writes (squashed), recognized again by `remove`
_ARG_BUTTERFLY = re.compile(
    r"\{constautokl_v=__shfl_xor_sync\(\w+,(\w+),kl_off\);constautokl_i=__shfl_xor_sync\(\w+,(\w+),kl_off\);"
    r"if\((?:kl_i>=0&&\(\2<0\|\|)?kl_v[<>]\1\|\|\(kl_v==\1&&kl_i<\2\)\)?\)\{\1=kl_v;\2=kl_i;\}\}"
)


def _filtered_scan(src: CudaSource, cond: ts.Node, start: str) -> tuple[str, str, str, str] | None:
    """(value, op, best, where) of `F && (where < 0 || E > best)`: an arg-max over the elements
    that pass filter F, `where < 0` meaning none found yet (a selection pass). Positions start at
    0, so a negative one is only ever the sentinel. F and E must not read `best` or `where`."""
    c = unparenthesized(cond, clause=True)
    if c.type != "binary_expression" or c.child_by_field_name("operator").type != "&&" or start != "0":
        return None
    filt, rest = c.child_by_field_name("left"), unparenthesized(c.child_by_field_name("right"), clause=True)
    if rest.type != "binary_expression" or rest.child_by_field_name("operator").type != "||":
        return None
    none = re.fullmatch(r"(\w+)<0", T.squash(src.text_of(rest.child_by_field_name("left"))))
    m = re.fullmatch(r"(.+?)([<>])(\w+)", T.squash(src.text_of(rest.child_by_field_name("right"))))
    if none is None or m is None:
        return None
    value, op, best = m.groups()
    where = none.group(1)
    if any(
        T.uses_ident(n, x)
        for n in (filt, rest.child_by_field_name("right").child_by_field_name("left"))
        for x in (best, where)
    ):
        return None
    return value, op, best, where


def _arg_pairs(
    src: CudaSource, lbody: ts.Node, filtered: bool = False
) -> dict[str, tuple[Reduction, ts.Node]]:
    """Arg-max/arg-min scans in a loop body: `if (E > best) { best = E; where = j; }` (strict, so
    the first position wins), with `best` and `where` used nowhere else in the loop; with
    `filtered`, also the selection pass `if (F && (where < 0 || E > best)) {...}`."""
    out: dict[str, tuple[Reduction, ts.Node]] = {}
    loop = lbody.parent
    var = (
        T.decl_name(loop.child_by_field_name("initializer"))
        if loop is not None
        and loop.type == "for_statement"
        and loop.child_by_field_name("initializer") is not None
        else None
    )
    init = loop.child_by_field_name("initializer") if loop is not None else None
    decl = init.children_by_field_name("declarator") if init is not None else []
    first = decl[0].child_by_field_name("value") if decl else None
    start = T.squash(src.text_of(first)) if first is not None else ""
    stmts = lbody.named_children if lbody.type == "compound_statement" else [lbody]
    for st in stmts:
        if st.type != "if_statement" or st.child_by_field_name("alternative") is not None:
            continue
        cond = T.squash(src.text_of(st.child_by_field_name("condition"))).strip("()")
        m = re.fullmatch(r"(.+?)([<>])(\w+)", cond)
        scan = _filtered_scan(src, st.child_by_field_name("condition"), start) if filtered else None
        if scan is not None:
            value, op, best, sentinel = scan
        elif m is not None:
            (value, op, best), sentinel = m.groups(), ""
        else:
            continue
        body = T.squash(src.text_of(st.child_by_field_name("consequence"))).strip("{}")
        got = dict(a.split("=", 1) for a in body.rstrip(";").split(";") if a.count("=") == 1)
        where = next((k for k, v in got.items() if v == var), None)
        if len(got) != 2 or got.get(best) != value or where is None or not re.fullmatch(r"\w+", where):
            continue
        if sentinel and sentinel != where:
            continue
        others = [
            n
            for n in T.walk(lbody)
            if n.type == "identifier"
            and n.text in (best.encode(), where.encode())
            and not (st.start_byte <= n.start_byte < st.end_byte)
        ]
        if others:
            continue
        out[best] = (Reduction(best, "argmax" if op == ">" else "argmin", "", where, bool(sentinel)), st)
    return out


def _exclusive(a: ts.Node, b: ts.Node) -> bool:
    """Whether `a` and `b` sit in different branches of one `if` (never both run)."""
    above = {(n.start_byte, n.end_byte, n.type) for n in T.ancestors(a, None)}
    p = b.parent
    while p is not None and (p.start_byte, p.end_byte, p.type) not in above:
        p = p.parent
    return p is not None and p.type == "if_statement"


def _warp_row(text: str, consts: dict[str, int]) -> bool:
    """`blockIdx.x * R + threadIdx.x / W` or `(blockIdx.x * blockDim.x + threadIdx.x) / W` (or
    `>> 5`), with W = 32."""
    t = re.sub(r"\((blockIdx\.x|threadIdx\.x|blockDim\.x)\)", r"\1", text)
    rows = r"(?:\((?:[^()]|\([^()]*\))*\)|[\w.*]+)"  # warps a block: a name, or one parenthesized
    m = re.fullmatch(rf"\(?blockIdx\.x\*{rows}\)?\+\(?threadIdx\.x(/|>>)(\w+)\)?", t)
    if m is None:
        m = re.fullmatch(r"\((.+)\)(/|>>)(\w+)", t)
        if m is None or T.global_tid(m.group(1)) is None:
            return False
        op, w = m.group(2), m.group(3)
    else:
        op, w = m.group(1), m.group(2)
    v = T.eval_int(w, consts)
    return v is not None and (v == WARP if op == "/" else v == 5)


def _strided_loop_of(src: CudaSource, ident: ts.Node, consts: dict[str, int]) -> ts.Node | None:
    """The for loop whose variable starts at `lane` (or `A + lane`) and steps by 32."""
    p = ident.parent
    while p is not None and p.type in ("binary_expression", "parenthesized_expression"):
        p = p.parent
    if p is None or p.type != "init_declarator":
        return None
    decl = p.parent
    loop = decl.parent if decl is not None else None
    if loop is None or loop.type != "for_statement" or loop.child_by_field_name("initializer") != decl:
        return None
    value = T.squash(src.text_of(p.child_by_field_name("value")))
    name = ident.text.decode() if ident.text else ""
    if value != name and not re.fullmatch(rf"[\w.()*]+\+{name}|{name}\+[\w.()*]+", value):
        return None
    var = T.decl_name(decl) or ""
    m = re.fullmatch(rf"{re.escape(var)}\+=(\w+)", T.squash(src.text_of(loop.child_by_field_name("update"))))
    return loop if m is not None and T.eval_int(m.group(1), consts) == WARP else None


def _lane_zero_test(src: CudaSource, ident: ts.Node) -> bool:
    p = ident.parent
    if p is None or p.type != "binary_expression":
        return False
    return re.fullmatch(r"\w+(==|!=)0|0(==|!=)\w+", T.squash(src.text_of(p))) is not None


def _warp_reduction_stmt(src: CudaSource, stmt: ts.Node, helpers: dict[str, str]) -> bool:
    """`v = reduce(v, ...)` with a helper that uses warp collectives, `v = __shfl_sync(m, v, k)`,
    or a butterfly loop `for (o ...) v += __shfl_xor_sync(m, v, o);` / `v = op(v, __shfl...(m, v, o));`."""
    if stmt.type == "for_statement":
        body = stmt.child_by_field_name("body")
        if body is not None and _ARG_BUTTERFLY.fullmatch(T.squash(src.text_of(body))):
            return True
        if WI.pair_merge_loop(src, stmt):
            return True
        if body is not None and body.type == "compound_statement" and len(body.named_children) == 1:
            body = body.named_children[0]
        if body is None or body.type != "expression_statement":
            return False
        t = T.squash(src.text_of(body)).rstrip(";")
        m = re.fullmatch(r"(\w+)(?:\+=|=\w+\(\1,)__shfl_(?:xor|down)_sync\(\w+,\1,\w+\)\)?", t)
        return m is not None
    if WI.lane0_broadcast(src, stmt):
        return True
    t = T.squash(src.text_of(stmt)).rstrip(";")
    m = re.fullmatch(r"([\w.]+)=([\w:]+)(?:<[^<>]*>)?\(\1(?:,.*)?\)", t)
    if m is None:
        return False
    name = m.group(2).split("::")[-1]
    if name.startswith("__shfl"):
        return name == "__shfl_sync"
    body = helpers.get(name)
    return body is not None and COLLECTIVE.search(body) is not None
