"""One block per row: the threads of a block stride a row together and combine their partial
reductions through warp shuffles and shared memory, instead of one thread walking the row alone.

With one thread per row, the threads of a warp read addresses a row apart, and a row's latency
is one thread's walk over N elements. With a block per row, the block's threads read consecutive
elements, and each loop-carried sum, maximum or minimum becomes per-thread partials merged by a
warp butterfly and one slot per warp in shared memory (every thread ends with the row's value, so
what follows the loop runs unchanged on every thread). Per-row results are stored by thread 0.

Forward (`apply`), on a thread-per-row kernel (the analysis of `warp_per_row`): the row is
`blockIdx.x`, every row loop starts at `A + threadIdx.x` and steps by `blockDim.x`, a block
all-reduce follows each loop for each reduction it carries, stores outside the loops are guarded
by `threadIdx.x == 0`, and every launch's grid becomes the row count (the bound of the row guard,
read at the launch); the block size is kept.

Backward (`remove`), on a block-per-row kernel (grid = a row count the kernel receives, the row
is `blockIdx.x`, threads only start block-strided loops and pick thread 0): the exchange between
threads goes (shared-memory slots, barriers, shuffles, statements that write or read them), an
all-reduce helper call `reduce(v, ...)` becomes `v` (a group of one), the thread index becomes 0
and the block size 1 in what is left, the row becomes the global thread index with a guard, and
every launch runs one thread per row in blocks of 256.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

import tree_sitter as ts

from klineage.deopt import _threads as T
from klineage.deopt.base import LaunchValues, Precondition, Refused, Site
from klineage.deopt.row_shape import block_for_row
from klineage.deopt.rows import (
    BlockRows,
    Reduction,
    base_name,
    fact,
    fn_texts,
    is_pointer,
    warp_butterfly,
    write_target,
)
from klineage.deopt.warp_per_row import WarpPerRow
from klineage.source import edit
from klineage.source.constructs import LaunchSite
from klineage.source.model import CudaSource

#: block size of the thread-per-row launches `remove` writes
ROW_THREADS = 256
_SYNC = re.compile(
    r"__syncthreads\w*|__syncwarp|__shfl\w*_sync|__reduce_\w+_sync|__ballot_sync|__any_sync|__all_sync"
    r"|__match\w*_sync"
)
_EXCHANGE = re.compile(_SYNC.pattern + r"|__shared__")
_INDEX = re.compile(r"(threadIdx|blockIdx|blockDim|gridDim)\.([xyz])")
#: `threadIdx.x & 31`, `% 32`, `>> 5`, `/ 32` (a lane or warp number)
_LANE_OR_WARP = re.compile(r"\(?threadIdx\.x\)?(&|%|>>|/)\(?(\w+)(-1)?\)?")


def _exchange_helpers(src: CudaSource) -> tuple[set[str], set[str]]:
    """(reducers, exchangers): device functions of this file that reach shared memory, barriers or
    warp collectives (directly or through the functions they call); reducers return a value and
    take it first, exchangers are the rest."""
    texts = fn_texts(src)
    reach: dict[str, bool] = {name: bool(_EXCHANGE.search(t)) for name, t in texts.items()}
    changed = True
    while changed:
        changed = False
        for name, t in texts.items():
            if not reach[name] and any(
                reach.get(m, False) for m in re.findall(r"\b(\w+)\s*[<(]", t) if m != name
            ):
                reach[name] = changed = True
    reducers, exchangers = set(), set()
    for f in src.functions:
        if f.kind != "device" or not reach.get(f.name):
            continue
        node = src.node_for(f)
        ret = node.child_by_field_name("type")
        void = ret is not None and src.text_of(ret).strip() == "void"
        (exchangers if void or not f.params else reducers).add(f.name)
    return reducers, exchangers


def _shared_names(body: ts.Node) -> set[str]:
    """Names of the `__shared__` variables declared in `body` (nested blocks included)."""
    out = set()
    for d in T.walk(body):
        if d.type == "declaration" and any(
            c.type in ("type_qualifier", "storage_class_specifier", "attribute_specifier")
            and c.text == b"__shared__"
            for c in d.children
        ):
            out |= {nm for dd in d.children_by_field_name("declarator") if (nm := T.declarator_ident(dd))}
    return out


def _folded(src: CudaSource, subs: dict[tuple[int, int], tuple[ts.Node, str]]) -> list[edit.Edit]:
    """The substitutions as edits, folding the arithmetic right around them: `0 * W`, `0 & 31`,
    `0 >> 5` and `0 / k` are 0, `1 * W` is W (when the other operand needs no substitution)."""
    edits, done = [], set()
    for (a, b), (n, text) in sorted(subs.items()):
        p = n.parent
        if p is not None and p.type == "binary_expression" and text in ("0", "1"):
            left, right = p.child_by_field_name("left"), p.child_by_field_name("right")
            op = p.child_by_field_name("operator").type
            other = right if left is not None and left.start_byte == a else left
            clean = other is not None and not any(other.start_byte <= x < other.end_byte for x, _ in subs)
            if clean and text == "0" and (op in ("*", "&") or (op in (">>", "/", "%") and other is right)):
                edits.append(edit.replace(p, "0"))
                done.add((a, b))
                continue
            if clean and text == "1" and op == "*":
                edits.append(edit.replace(p, src.text_of(other)))
                done.add((a, b))
                continue
        edits.append(edit.replace(n, text))
    return edits


def _slot_store(src: CudaSource, stmt: ts.Node, arr: str, index: str, value: str, out: BlockRows) -> None:
    """Track the slot protocol: lane 0 of each warp stores `value` at the warp's slot, then a fold
    gathers the slots into slot 0 (`arr[0] = ...`)."""
    guard = next((a for a in T.ancestors(stmt) if a.type == "if_statement"), None)
    cond = guard.child_by_field_name("condition") if guard is not None else None
    lane0 = cond is not None and re.search(r"==0\)*$", T.squash(src.text_of(cond))) is not None
    if index == "0" and arr in out.slot_values:
        out.folded.add(arr)
    elif not index.isdigit() and lane0:
        out.slot_values[arr] = value
        out.folded.discard(arr)


def _broadcast(
    src: CudaSource, decl: ts.Node, slots: dict[str, str], folded: set[str]
) -> tuple[ts.Node, str] | None:
    """`T b = s[0];` after the warps stored `v` in their slots of `s` and a fold gathered them:
    one thread's `b` is `v`."""
    ds = decl.children_by_field_name("declarator")
    value = ds[0].child_by_field_name("value") if len(ds) == 1 and ds[0].type == "init_declarator" else None
    m = re.fullmatch(r"(\w+)\[0\]", T.squash(src.text_of(value))) if value is not None else None
    ok = m is not None and value is not None and m.group(1) in folded
    return (value, slots[m.group(1)]) if ok and m is not None and value is not None else None


def _feeds_only_deleted(kids: list[ts.Node], i: int, gone: list[bool]) -> bool:
    """The names `kids[i]` declares are read only by sibling statements that all go (a thread-0
    fold's accumulator `float v = slots[0];` read by the fold loop and the slot store)."""
    names = {nm for d in kids[i].children_by_field_name("declarator") if (nm := T.declarator_ident(d))}
    readers = [j for j, c in enumerate(kids) if j != i and any(T.uses_ident(c, nm) for nm in names)]
    return bool(names) and all(gone[j] for j in readers)


class BlockPerRow(WarpPerRow):
    name = "block_per_row"
    category = "tiling"
    intent = (
        "Give each row a block instead of a thread: threads stride the row (coalesced loads), "
        "partial sums/maxima/minima are merged by a warp butterfly and shared memory, thread 0 stores "
        "per-row results."
    )
    mechanical_apply = True
    strides_steps = (
        True  # `for (col = 0; col < N; col += W)`: thread t starts at t * W, steps by blockDim.x * W
    )
    #: a block's all-reduce goes through shared memory between barriers and knows no filtered
    #: (sentinel) arg-max: k-pass selections stay with the warp
    pass_loops = False

    # ---- analysis: block per row (backward) --------------------------------------------------
    def _classify(
        self,
        src: CudaSource,
        node: ts.Node,
        shared: set[str],
        reducers: set[str],
        exchangers: set[str],
        out: BlockRows,
        problems: list[str],
    ) -> bool:
        """Mark the exchange statements under `node` for deletion; True when all of `node` goes."""

        def touches(n: ts.Node) -> bool:
            if _SYNC.search(src.text_of(n)):
                return True
            calls = T.calls_named(n, r".*")
            inside = [(c.start_byte, c.end_byte) for c in calls if T.call_name(c).split("::")[-1] in reducers]
            if any(
                i.type == "identifier"
                and (i.text or b"").decode() in shared
                and not any(a <= i.start_byte < b for a, b in inside)
                for i in T.walk(n)
            ):
                return True
            return any(T.call_name(c).split("::")[-1] in exchangers for c in calls)

        line = node.start_point.row + 1
        t = node.type
        if t == "compound_statement":
            kids = [c for c in node.named_children if c.type != "comment"]
            gone, held = [], []
            for i, c in enumerate(kids):
                mine: list[str] = []
                gone.append(self._classify(src, c, shared, reducers, exchangers, out, mine))
                if c.type == "declaration" and mine:
                    held.append((i, mine))  # decided once its block's other statements are
                else:
                    problems += mine
            for i, mine in held:
                if _feeds_only_deleted(kids, i, gone):
                    out.deleted.append(kids[i])
                    gone[i] = True
                else:
                    problems += mine
            return bool(kids) and all(gone)
        if t == "declaration":
            if any(T.declarator_ident(d) in shared for d in node.children_by_field_name("declarator")):
                out.deleted.append(node)
                return True
            if touches(node):
                if (b := _broadcast(src, node, out.slot_values, out.folded)) is not None:
                    out.broadcasts.append(b)
                    return False
                problems.append(f"line {line}: a value read from shared memory or another thread is declared")
                return False
            self._reducer_calls(src, node, reducers, out)
            return False
        if t == "expression_statement":
            if touches(node):
                m = re.fullmatch(r"(\w+)\[([^\]]+)\]=(\w+);", T.squash(src.text_of(node)))
                if m is not None and m.group(1) in shared:
                    _slot_store(src, node, m.group(1), m.group(2), m.group(3), out)
                out.deleted.append(node)
                return True
            calls = self._reducer_calls(src, node, reducers, out)
            m = re.fullmatch(r"([\w.]+)=[\w:]+(?:<[^<>]*>)?\((.+)\);", T.squash(src.text_of(node)))
            if (
                calls
                and m is not None
                and len(calls) == 1
                and T.squash(src.text_of(T.call_args(calls[0])[0])) == m.group(1)
            ):
                out.reducer_calls.remove(calls[0])
                out.self_assigns.append(node)
                out.deleted.append(node)
                return True
            return False
        if t == "if_statement":
            cond = node.child_by_field_name("condition")
            if cond is not None and touches(cond):
                out.deleted.append(node)
                return True
            parts = [
                p
                for p in (node.child_by_field_name("consequence"), node.child_by_field_name("alternative"))
                if p is not None
            ]
            before = len(out.deleted)
            gone = [
                self._classify(
                    src,
                    p if p.type != "else_clause" else p.named_children[-1],
                    shared,
                    reducers,
                    exchangers,
                    out,
                    problems,
                )
                for p in parts
            ]
            if all(gone):
                del out.deleted[before:]
                out.deleted.append(node)
                return True
            return False
        if t in ("for_statement", "while_statement", "do_statement", "for_range_loop"):
            if not touches(node):
                self._reducer_calls(src, node, reducers, out)
                return False
            fn = T.fn_node_of(node)
            stores = [
                w
                for w in T.walk(node)
                if w.type in ("assignment_expression", "update_expression")
                and (left := write_target(w)) is not None
                and left.type != "identifier"
                and (base := base_name(left) or "") not in shared
                and fn is not None
                and is_pointer(fn, base)
            ]
            if not stores:  # the loop only moves values between threads (a tree, a fold of the slots)
                out.deleted.append(node)
                return True
            problems.append(f"line {line}: a loop mixes stores to memory with exchange between threads")
            return False
        if t in ("return_statement", "break_statement", "continue_statement", "comment"):
            if touches(node):
                problems.append(f"line {line}: a value from another thread leaves the kernel")
            return False
        if touches(node):
            problems.append(f"line {line}: an exchange between threads in a {t}")
        return False

    def _exchanges(self, src: CudaSource, body: ts.Node, out: BlockRows, between: str) -> Precondition:
        """Classify the statements of a kernel body (`_classify`): the fact that the threads share
        nothing but reductions."""
        shared = _shared_names(body)
        reducers, exchangers = _exchange_helpers(src)
        problems: list[str] = []
        for c in [c for c in body.named_children if c.type != "comment"]:
            self._classify(src, c, shared, reducers, exchangers, out, problems)
        return fact(
            "exchange_only_reductions",
            not problems,
            f"{len(out.deleted)} exchange statement(s) and {len(out.reducer_calls)} all-reduce call(s) "
            f"between {between}, nothing else shared"
            if not problems
            else problems[0],
            "Pipeline",
        )

    def _reducer_calls(
        self, src: CudaSource, node: ts.Node, reducers: set[str], out: BlockRows
    ) -> list[ts.Node]:
        calls = [
            c
            for c in T.calls_named(node, r".*")
            if T.call_name(c).split("::")[-1] in reducers
            and T.call_args(c)
            and not any(o.start_byte <= c.start_byte < o.end_byte for o in out.reducer_calls)
        ]
        calls = [
            c
            for c in calls
            if not any(o is not c and o.start_byte <= c.start_byte < o.end_byte for o in calls)
        ]
        out.reducer_calls += calls
        return calls

    def _block_per_row(self, src: CudaSource, fn: ts.Node, kernel: str) -> BlockRows | None:
        body = fn.child_by_field_name("body")
        if body is None:
            return None
        text = src.text_of(body)
        uses = {m.group(0) for m in _INDEX.finditer(T.squash(text))}
        if "blockIdx.x" not in uses or "threadIdx.x" not in uses:
            return None
        out = BlockRows(kernel, [])
        others = sorted(uses - {"blockIdx.x", "threadIdx.x", "blockDim.x"})
        out.facts.append(
            fact(
                "one_dimensional_rows",
                not others,
                "the row is blockIdx.x and the thread's rank threadIdx.x: no other index"
                if not others
                else f"the kernel uses {', '.join(others)} (a 2-D tile or a grid loop, not a row per block)",
                "Layout",
            )
        )
        assigned = T.assigned_in(fn)
        # the block size, as the kernel names it: blockDim.x and what every launch passes
        syms = {"blockDim.x"}
        launches = T.launches_of(src, kernel)
        bounds, bad = set(), []
        info = next((k for k in src.kernels if k.name == kernel), None)
        for ls in launches:
            cfg = T.config_nodes(src, ls)
            if len(cfg) < 2 or info is None:
                bad.append(f"line {ls.line}: no launch configuration")
                continue
            block = T.squash(src.text_of(cfg[1]))
            if re.fullmatch(r"[A-Za-z_]\w*", block):
                syms.add(block)
            launcher = T.enclosing_launcher(src, ls)
            params = [
                p
                for p, a in T.param_map(info, ls).items()
                if _same_value(src, launcher, a, src.text_of(cfg[0]))
            ]
            if not params:
                bad.append(f"line {ls.line}: grid '{src.text_of(cfg[0])}' is not an argument of the kernel")
            else:
                bounds.add(params[0])
        out.block_syms = tuple(sorted(syms))
        if not launches:
            out.facts.append(fact("launch_in_file", False, f"no launch of {kernel} in this file", "Layout"))
        elif bad or len(bounds) != 1 or next(iter(bounds)) in assigned:
            out.facts.append(
                fact(
                    "grid_is_row_count",
                    False,
                    "; ".join(bad) or "the launches pass different row counts",
                    "Layout",
                )
            )
        else:
            out.bound = next(iter(bounds))
            out.facts.append(
                fact(
                    "grid_is_row_count",
                    True,
                    f"every launch's grid is the kernel's `{out.bound}`: one block per row",
                    "Layout",
                )
            )
        out.facts.append(self._exchanges(src, body, out, "the threads of a row"))
        out.facts.append(self._thread_roles(src, body, out, assigned))
        return out

    def _thread_roles(
        self, src: CudaSource, body: ts.Node, out: BlockRows, assigned: set[str]
    ) -> Precondition:
        """threadIdx.x may only start block-strided loops (their variable steps by a multiple of the
        block size) or name a lane/warp that picks thread 0; anything else means each thread owns
        more than a stride of the row (a register-cached row) and a single thread would miss it."""
        gone = [(d.start_byte, d.end_byte) for d in out.deleted]
        syms = out.block_syms
        sym_rx = "|".join(re.escape(s) for s in syms)
        bad: list[int] = []
        strided = 0
        for n in T.walk(body):
            if n.type != "field_expression" or T.squash(src.text_of(n)) != "threadIdx.x":
                continue
            if any(a <= n.start_byte < b for a, b in gone):
                continue
            p = n.parent
            while p is not None and p.type in (
                "binary_expression",
                "parenthesized_expression",
                "cast_expression",
            ):
                p = p.parent
            if n.parent is not None and re.fullmatch(
                r"threadIdx\.x(==|!=)0|0(==|!=)threadIdx\.x", T.squash(src.text_of(n.parent))
            ):
                continue  # thread 0 picked for a store
            if p is None or p.type != "init_declarator":
                bad.append(n.start_point.row + 1)
                continue
            var = T.declarator_ident(p) or ""
            value = T.squash(src.text_of(p.child_by_field_name("value")))
            if _LANE_OR_WARP.fullmatch(value) and var not in assigned:
                kept = [
                    u
                    for u in T.walk(body)
                    if u.type == "identifier"
                    and u.text == var.encode()
                    and u.start_byte != p.child_by_field_name("declarator").start_byte
                    and not any(a <= u.start_byte < b for a, b in gone)
                ]
                if all(
                    re.fullmatch(rf"{var}(==|!=)0|0(==|!=){var}", T.squash(src.text_of(u.parent)))
                    for u in kept
                ):
                    decl = p.parent
                    if (
                        not kept
                        and decl is not None
                        and decl.type == "declaration"
                        and len(decl.children_by_field_name("declarator")) == 1
                        and decl.parent is not None
                        and decl.parent.type == "compound_statement"
                    ):
                        out.unused_ranks.append(decl)
                    continue
                bad.append(n.start_point.row + 1)
                continue
            # a `for` initializer's variable lives in its loop: other loops' `i` are other variables
            scope = p.parent.parent if p.parent is not None and p.parent.parent is not None else body
            if scope.type != "for_statement" or p.parent.type != "declaration":
                scope = body
            steps = [
                w
                for w in T.walk(scope)
                if w.type in ("assignment_expression", "update_expression")
                and T.squash(
                    src.text_of(w.child_by_field_name("left") or w.child_by_field_name("argument") or w)
                )
                == var
            ]
            ok = bool(steps) and all(
                w.type == "assignment_expression"
                and w.child_by_field_name("operator") is not None
                and w.child_by_field_name("operator").type == "+="
                and re.search(
                    rf"(?<![\w.])({sym_rx})(?![\w])", T.squash(src.text_of(w.child_by_field_name("right")))
                )
                for w in steps
            )
            if ok and re.fullmatch(r"(?:[\w.]+\+)?\(?threadIdx\.x\)?(?:\*[\w.]+)?(?:\+[\w.]+)?", value):
                strided += 1
            else:
                bad.append(n.start_point.row + 1)
        holds = not bad and strided > 0
        return fact(
            "thread_only_strides",
            holds,
            f"threadIdx.x only starts {strided} loop(s) striding the row by the block and picks thread 0"
            if holds
            else (
                f"threadIdx.x indexes data beyond a block-strided loop (line {bad[0]}): each thread "
                "owns more than a stride of the row (a register-cached row)"
                if bad
                else "no loop strides the row by the block"
            ),
            "Layout",
        )

    # ---- operator interface ------------------------------------------------------------------
    def find(self, src: CudaSource) -> list[Site]:
        sites = []
        for name, fn in self._kernels(src):
            f = self._block_per_row(src, fn, name)
            if f is not None and f.bound and (f.deleted or f.reducer_calls or f.ok):
                sites.append(self.site(src, fn, f"kernel {name}: one block per row", kernel=name))
        return sites

    def removal_preconditions(self, src: CudaSource, site: Site) -> list[Precondition]:
        fn = src.node_at(site.anchor)
        f = self._block_per_row(src, fn, site.details["kernel"]) if fn is not None else None
        if f is None:
            return [
                fact(
                    "one_block_per_row",
                    False,
                    "no block and thread index of a block-per-row kernel here",
                    "Layout",
                )
            ]
        return f.facts

    def _remove(self, src: CudaSource, site: Site) -> CudaSource:
        fn = src.node_at(site.anchor)
        assert fn is not None
        f = self._block_per_row(src, fn, site.details["kernel"])
        assert f is not None and f.ok
        body = fn.child_by_field_name("body")
        assert body is not None
        edits: list[edit.Edit] = []
        # outermost deleted statements only (a deleted `if` may hold deleted statements)
        deleted = [
            d
            for d in f.deleted
            if not any(
                o is not d and o.start_byte <= d.start_byte and d.end_byte <= o.end_byte for o in f.deleted
            )
        ]
        for d in deleted:
            braced = d.parent is not None and d.parent.type == "compound_statement"
            edits.append(edit.delete(src, d) if braced else edit.replace(d, ";"))
        gone = [(d.start_byte, d.end_byte) for d in deleted + f.unused_ranks]

        def alive(n: ts.Node) -> bool:
            return not any(a <= n.start_byte < b for a, b in gone)

        calls = [c for c in f.reducer_calls if alive(c)]
        for c in calls:
            edits.append(edit.replace(c, T.paren(self._single(src, T.call_args(c)[0], f.block_syms))))
        inside = [(c.start_byte, c.end_byte) for c in calls]
        consts = [
            (d.start_byte, d.end_byte)
            for d in T.walk(body)
            if d.type == "declaration" and re.match(r"\s*(static\s+)?constexpr\b", src.text_of(d))
        ]
        subs: dict[tuple[int, int], tuple[ts.Node, str]] = {}
        for n in T.walk(body):
            if not alive(n) or any(a <= n.start_byte < b for a, b in inside):
                continue
            t = T.squash(src.text_of(n)) if n.type in ("field_expression", "identifier") else ""
            if n.type == "field_expression" and t == "blockIdx.x":
                subs[(n.start_byte, n.end_byte)] = (n, "kl_row")
            elif n.type == "field_expression" and t == "threadIdx.x":
                subs[(n.start_byte, n.end_byte)] = (n, "0")
            elif (
                t in f.block_syms
                and (n.type == "field_expression" or n.parent is None or n.parent.type != "field_expression")
                and not any(a <= n.start_byte < b for a, b in consts)
            ):
                subs[(n.start_byte, n.end_byte)] = (n, "1")
        edits += _folded(src, subs)
        edits += [edit.replace(v, x) for v, x in f.broadcasts]
        edits += [edit.delete(src, d) for d in f.unused_ranks]
        first = next(c for c in body.children if c.type == "{")
        ind = edit.indent_of(src, next((c for c in body.named_children), body)) or "    "
        edits.append(
            edit.insert_after(
                first,
                f"\n{ind}const int kl_row = blockIdx.x * blockDim.x + threadIdx.x;"
                f"\n{ind}if (kl_row >= {f.bound}) return;",
            )
        )
        for ls in T.launches_of(src, site.details["kernel"]):
            cfg = T.config_nodes(src, ls)
            edits += [
                edit.replace(cfg[0], T.ceil_div(src.text_of(cfg[0]), str(ROW_THREADS))),
                edit.replace(cfg[1], str(ROW_THREADS)),
            ]
        return edit.apply_edits(src, edits)

    @staticmethod
    def _single(src: CudaSource, arg: ts.Node, syms: tuple[str, ...]) -> str:
        """A reducer's argument as one thread computes it (thread 0 of a block of one)."""
        text = re.sub(r"\bthreadIdx\s*\.\s*x\b", "0", src.text_of(arg))
        for s in syms:
            text = re.sub(rf"(?<![\w.]){re.escape(s)}(?!\w)", "1", text)
        return re.sub(r"\bblockIdx\s*\.\s*x\b", "kl_row", text)

    # ---- forward: thread per row -> block per row ---------------------------------------------
    def _row_bound(self, src: CudaSource, fn: ts.Node, row: str) -> str | None:
        """`M` of the row guard `if (row >= M) return;` (or `M <= row`)."""
        body = fn.child_by_field_name("body")
        for s in body.named_children if body is not None else []:
            if s.type != "if_statement":
                continue
            cond = T.squash(src.text_of(s.child_by_field_name("condition"))).strip("()")
            m = re.fullmatch(rf"{re.escape(row)}>=(\w+)|(\w+)<={re.escape(row)}", cond)
            if m and T.squash(src.text_of(s.child_by_field_name("consequence"))) in ("return;", "{return;}"):
                return m.group(1) or m.group(2)
        return None

    def preconditions(self, src: CudaSource, site: Site) -> list[Precondition]:
        facts = super().preconditions(src, site)
        facts = [f for f in facts if f.name != "lane_name_free"]
        fn = src.node_at(site.anchor)
        row = self._row_name(src, fn) if fn is not None else None
        bound = self._row_bound(src, fn, row) if fn is not None and row else None
        info = next((k for k in src.kernels if k.name == site.details["kernel"]), None)
        args = (
            [T.param_map(info, ls).get(bound or "") for ls in T.launches_of(src, site.details["kernel"])]
            if info is not None
            else []
        )
        holds = bound is not None and bool(args) and all(a is not None for a in args)
        facts.append(
            fact(
                "row_count_at_launch",
                holds,
                f"the row guard's bound `{bound}` is a kernel argument: each launch's grid becomes it"
                if holds
                else "no `if (row >= M) return;` with M a kernel argument: the grid cannot "
                "become the row count",
                "Layout",
            )
        )
        return facts

    def shape_preconditions(
        self, src: CudaSource, site: Site, bench: Sequence[LaunchValues]
    ) -> list[Precondition]:
        """A row shorter than the block leaves most of its threads idle on every pass
        (softmax_bf16_short: rows of 100 under blocks of 256): at the bench sizes some row must
        reach the block, or a warp per row is the layout that fits."""
        shapes = self._row_shapes(src, site, bench)
        if not shapes or any(s.block is None or s.length >= s.block for s in shapes):
            return []
        seen = [f"{s.length} < {s.block}" for s in shapes]
        return [
            fact(
                "row_fills_the_block",
                False,
                f"at every bench size the rows are shorter than the block ({', '.join(dict.fromkeys(seen))}): "
                "most of each block would idle; a warp per row fits",
                "Layout",
            )
        ]

    def _row_name(self, src: CudaSource, fn: ts.Node) -> str | None:
        body = fn.child_by_field_name("body")
        rows = (
            [
                d
                for d in T.walk(body)
                if d.type == "init_declarator"
                and d.child_by_field_name("value") is not None
                and T.global_tid(src.text_of(d.child_by_field_name("value"))) == "blockDim.x"
            ]
            if body
            else []
        )
        return T.declarator_ident(rows[0]) if len(rows) == 1 else None

    def _apply(self, src: CudaSource, site: Site) -> CudaSource:
        return self._to_blocks(src, site, {})

    def _apply_at(self, src: CudaSource, site: Site, bench: Sequence[LaunchValues]) -> CudaSource:
        """A block per row whose block is sized for the longest bench row (row_shape's rule): a
        launch keeps its block unless each thread would walk more than MAX_PER_THREAD elements."""
        shapes = self._row_shapes(src, site, bench) or []
        if not shapes or any(s.block is None for s in shapes):
            return self._apply(src, site)
        longest = max(s.length for s in shapes)
        blocks = {s.block for s in shapes if s.block is not None}
        grown = {b: block_for_row(longest, b) for b in blocks}
        return self._to_blocks(src, site, {b: g for b, g in grown.items() if g != b})

    def _to_blocks(self, src: CudaSource, site: Site, grow: dict[int, int]) -> CudaSource:
        """The forward edit; a launch whose block evaluates to a key of `grow` runs its value."""
        fn = src.node_at(site.anchor)
        assert fn is not None
        f = self._thread_per_row(src, fn, site.details["kernel"])
        if not all(x.holds for x in f.facts if x.name != "lane_name_free"):
            raise Refused(f"{self.name}: preconditions changed under the edit")
        assert f.row_value is not None
        row = self._row_name(src, fn)
        bound = self._row_bound(src, fn, row or "")
        info = next(k for k in src.kernels if k.name == site.details["kernel"])
        decls = T.local_decls(fn)
        edits = [edit.replace(f.row_value, "blockIdx.x")]
        for r in f.loops:
            loop = self._restride(
                src, r, "threadIdx.x", "blockDim.x", lambda red: self._all_reduce(src, red, decls)
            )
            edits.append(edit.replace(r.loop, loop))
        edits += [self._guarded(src, stmt, "threadIdx.x == 0") for stmt in f.stores]
        consts = T.file_constants(src)
        launches = T.launches_of(src, site.details["kernel"])
        sized: set[tuple[int, int]] = set()
        for ls in launches:
            grid, block = T.config_nodes(src, ls)[:2]
            edits.append(edit.replace(grid, T.param_map(info, ls)[bound or ""]))
            launcher = T.enclosing_launcher(src, ls)
            now = (
                T.eval_int(T.resolve_local(src, launcher, ls.block), consts) if launcher is not None else None
            )
            if launcher is None or now not in grow:
                continue
            where = _block_constant(src, launcher, block, launches) or block
            if (where.start_byte, where.end_byte) not in sized:
                sized.add((where.start_byte, where.end_byte))
                edits.append(edit.replace(where, str(grow[now])))
        return edit.apply_edits(src, edits)

    @staticmethod
    def _all_reduce(src: CudaSource, red: Reduction, decls: dict[str, ts.Node]) -> list[str]:
        """A block all-reduce of `red`: a warp butterfly, one shared slot per warp, every thread
        folds the warps' slots in order (so all threads hold the same bits)."""

        def type_of(name: str) -> str:
            d = decls.get(name)
            decl = d.parent if d is not None and d.parent is not None else None
            ty = decl.child_by_field_name("type") if decl is not None else None
            return src.text_of(ty) if ty is not None else f"decltype({name})"

        v = red.var
        slot = "if ((threadIdx.x & 31) == 0)"
        nwarps = "static_cast<int>(blockDim.x >> 5)"
        if red.kind in ("argmax", "argmin"):
            i, cmp = red.index, (">" if red.kind == "argmax" else "<")
            return warp_butterfly(red) + [
                "{  // across the warps: one slot per warp, folded in order by every thread",
                f"    __shared__ {type_of(v)} kl_sv[32];",
                f"    __shared__ {type_of(i)} kl_si[32];",
                f"    {slot} {{ kl_sv[threadIdx.x >> 5] = {v}; kl_si[threadIdx.x >> 5] = {i}; }}",
                "    __syncthreads();",
                f"    {v} = kl_sv[0]; {i} = kl_si[0];",
                f"    for (int kl_w = 1; kl_w < {nwarps}; ++kl_w)",
                f"        if (kl_sv[kl_w] {cmp} {v} || (kl_sv[kl_w] == {v} && kl_si[kl_w] < {i})) "
                f"{{ {v} = kl_sv[kl_w]; {i} = kl_si[kl_w]; }}",
                "    __syncthreads();  // the slots are free again",
                "}",
            ]
        merge_slot = f"{v} += kl_s[kl_w]" if red.kind == "sum" else f"{v} = {red.fn}({v}, kl_s[kl_w])"
        return warp_butterfly(red) + [
            "{  // across the warps: one slot per warp, folded in order by every thread",
            f"    __shared__ {type_of(v)} kl_s[32];",
            f"    {slot} kl_s[threadIdx.x >> 5] = {v};",
            "    __syncthreads();",
            f"    {v} = kl_s[0];",
            f"    for (int kl_w = 1; kl_w < {nwarps}; ++kl_w) {merge_slot};",
            "    __syncthreads();  // the slots are free again",
            "}",
        ]


def _same_value(src: CudaSource, launcher: ts.Node | None, a: str, b: str) -> bool:
    """`a` and `b` are the same expression as written, or through the launcher's never-reassigned
    locals (`grid_size` initialised to `N`, passed as `N`)."""
    if T.squash(a) == T.squash(b):
        return True
    return launcher is not None and T.squash(T.resolve_local(src, launcher, a)) == T.squash(
        T.resolve_local(src, launcher, b)
    )


def _block_constant(
    src: CudaSource, launcher: ts.Node, block: ts.Node, launches: Sequence[LaunchSite]
) -> ts.Node | None:
    """The literal initializer of the launcher's local that names the block (`const int threads =
    64;`), when that local is read only in these launches' configurations (the grid goes to the row
    count, so sizing the local sizes the block alone); None otherwise (the launch's block is
    written instead)."""
    name = T.squash(src.text_of(block))
    if not re.fullmatch(r"[A-Za-z_]\w*", name) or name in T.assigned_in(launcher):
        return None
    decls = [d for d in T.walk(launcher) if d.type == "init_declarator" and T.declarator_ident(d) == name]
    value = decls[0].child_by_field_name("value") if len(decls) == 1 else None
    if value is None or value.type != "number_literal":
        return None
    configs = [(c.start_byte, c.end_byte) for ls in launches for c in T.config_nodes(src, ls)]
    for n in T.walk(launcher):
        if (
            n.type != "identifier"
            or src.text_of(n) != name
            or decls[0].start_byte <= n.start_byte < value.start_byte
        ):
            continue
        if not any(a <= n.start_byte < b for a, b in configs):
            return None
    return value
