"""Grid-stride loops: `for (i = blockIdx.x*blockDim.x + threadIdx.x; i < n; i += gridDim.x*blockDim.x)`.

A grid-stride loop decouples the grid from the problem size: the launcher can launch just enough
blocks to fill the GPU (a multiple of the SM count), and each thread amortizes its index math and
setup over several elements. Removing it gives one element per thread
(`i = ...; if (i < n) body`) with a grid that covers all elements, `(n + block - 1) / block`,
computed from the launcher's own expressions.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, replace

import tree_sitter as ts

from klineage.deopt import _threads as T
from klineage.deopt import strided_copy
from klineage.deopt.base import LaunchValues, Operator, Precondition, Refused, Site
from klineage.source import edit
from klineage.source.constructs import Function
from klineage.source.model import CudaSource

#: blocks resident on an H200 at full occupancy for 256-thread blocks: 132 SMs x 8
GRID_CAP = "132 * 8"
_SYNC = r"__syncthreads\w*|__syncwarp|__shfl\w*|__ballot_sync|__any_sync|__all_sync|__reduce_\w+|\w*::sync|bar_sync"


@dataclass(frozen=True)
class _Loop:
    node: ts.Node
    var: str
    var_type: str
    start: str
    offset: str
    bound: str
    block: str


def _loop_parts(src: CudaSource, fn: ts.Node, node: ts.Node) -> _Loop | None:
    init = node.child_by_field_name("initializer")
    cond = node.child_by_field_name("condition")
    upd = node.child_by_field_name("update")
    if init is None or cond is None or upd is None or init.type != "declaration":
        return None
    decls = init.children_by_field_name("declarator")
    if len(decls) != 1 or decls[0].type != "init_declarator":
        return None
    var = T.decl_name(init)
    value = decls[0].child_by_field_name("value")
    ty = init.child_by_field_name("type")
    if not var or value is None or ty is None:
        return None
    if cond.type != "binary_expression" or T.squash(src.text_of(cond.child_by_field_name("left"))) != var:
        return None
    op = cond.child_by_field_name("operator")
    if op is None or op.type != "<":
        return None
    bound = src.text_of(cond.child_by_field_name("right"))
    if upd.type != "assignment_expression" or upd.child_by_field_name("operator").type != "+=":
        return None
    if T.squash(src.text_of(upd.child_by_field_name("left"))) != var:
        return None
    stride = T.resolve_local(src, fn, src.text_of(upd.child_by_field_name("right")))
    start_text = src.text_of(value)
    if (
        T.strip_casts(stride) == "gridDim.x"
        and T.strip_casts(T.resolve_local(src, fn, start_text)) == "blockIdx.x"
    ):
        return _Loop(
            node, var, src.text_of(ty), start_text, "", bound, "1"
        )  # block-stride: one item per block
    sblock = T.grid_stride(stride)
    if sblock is None:
        return None
    tblock, offset = _tid_with_offset(src, fn, value)
    if tblock is None or T.squash(tblock) != T.squash(sblock):
        return None
    return _Loop(node, var, src.text_of(ty), start_text, offset, bound, tblock)


def _tid_with_offset(src: CudaSource, fn: ts.Node, value: ts.Node) -> tuple[str | None, str]:
    """(block text, offset text) when `value` is the global thread index plus an optional offset."""
    text = T.resolve_local(src, fn, src.text_of(value))
    b = T.global_tid(text)
    if b is not None:
        return b, ""
    t = T.strip_casts(text)
    for tid in re.finditer(r"\(?(?:blockIdx\.x\*[\w.]+|[\w.]+\*blockIdx\.x)\)?\+threadIdx\.x", t):
        b = T.global_tid(tid.group(0))
        head, tail = t[: tid.start()], t[tid.end() :]
        if b is not None and head.endswith("+") and not tail and _balanced(head[:-1]):
            return b, head[:-1]
        if b is not None and not head and tail.startswith("+") and _balanced(tail[1:]):
            return b, tail[1:]
    return None, ""


def _balanced(t: str) -> bool:
    depth = 0
    for ch in t:
        depth += (ch == "(") - (ch == ")")
        if depth < 0:
            return False
    return depth == 0 and bool(t)


def _grid_loops(src: CudaSource, fn: ts.Node) -> list[_Loop]:
    out = []
    for n in T.walk(fn):
        if n.type == "for_statement":
            lp = _loop_parts(src, fn, n)
            if lp is not None:
                out.append(lp)
    return out


_KINDS = {
    "no_barrier_in_body": "Pipeline",
    "no_jump_out": "Pipeline",
    "index_not_written": "Pipeline",
    "body_ignores_grid": "Layout",
    "grid_computable": "Layout",
    "grid_1d": "Layout",
    "launch_in_file": "Layout",
    "stride_matches_block": "Layout",
    "grid_not_reused": "Layout",
    "stride_is_grid": "Layout",
    "independent_iterations": "Pipeline",
    "index_only_through_var": "Layout",
}


def _kinded(facts: list[Precondition]) -> list[Precondition]:
    """Give each fact its skill-card kind (Layout, Pipeline, ...)."""
    return [f if f.kind else replace(f, kind=_KINDS.get(f.name, "")) for f in facts]


class GridStride(Operator):
    name = "grid_stride"
    category = "tiling"
    intent = (
        "Turn one-element-per-thread code into a grid-stride loop so the launcher can size the grid "
        "to the GPU (a multiple of the SM count) instead of to the problem."
    )
    mechanical_apply = True

    # ---- backward ----------------------------------------------------------------------------
    def find(self, src: CudaSource) -> list[Site]:
        sites = []
        for k in src.kernels:
            fn = src.node_for(k)
            for lp in _grid_loops(src, fn):
                sites.append(
                    self.site(
                        src,
                        lp.node,
                        f"grid-stride loop over {lp.var} < {T.squash(lp.bound)} in {k.name}",
                        kernel=k.name,
                        var=lp.var,
                        bound=T.squash(lp.bound),
                        block=lp.block,
                        offset=T.squash(lp.offset),
                        level="block" if lp.block == "1" else "thread",
                    )
                )
        return sites

    def _loop(self, src: CudaSource, site: Site) -> tuple[_Loop, Function, ts.Node]:
        node = src.node_at(site.anchor)
        kernel = src.kernel(site.details.get("kernel", ""))
        if node is None or kernel is None:
            raise Refused(f"{self.name}: site {site.anchor} not found")
        fn = src.node_for(kernel)
        lp = _loop_parts(src, fn, node)
        if lp is None:
            raise Refused(f"{self.name}: the loop at line {site.line} is no longer a grid-stride loop")
        return lp, kernel, fn

    def _grids(
        self, src: CudaSource, lp: _Loop, kernel: Function, fn: ts.Node
    ) -> tuple[list[Precondition], dict]:
        """Facts about every launch of the kernel and the new grid text for each."""
        facts: list[Precondition] = []
        grids: dict = {}
        launches = T.launches_of(src, kernel.name)
        if not launches:
            return [
                Precondition(
                    "launch_in_file",
                    False,
                    f"no launch of {kernel.name} in this file: the grid cannot be resized",
                )
            ], grids
        count = lp.bound if not lp.offset else f"{T.paren(lp.bound)} - {T.paren(lp.offset)}"
        consts = T.file_constants(src)
        clean = len(_grid_loops(src, fn)) == 1 and not lp.offset and not T.guards(src, lp.node)
        for ls in launches:
            cfg = T.config_nodes(src, ls)
            launcher = T.enclosing_launcher(src, ls)
            where = f"launch at line {ls.line}"
            if launcher is None or len(cfg) < 2:
                facts.append(
                    Precondition("grid_computable", False, f"{where}: no launcher function around it")
                )
                continue
            grid_text, block_text = src.text_of(cfg[0]), src.text_of(cfg[1])
            if _is_dim3(src, launcher, grid_text) or _is_dim3(src, launcher, block_text):
                facts.append(
                    Precondition(
                        "grid_1d", False, f"{where}: grid or block is a dim3; only 1-D launches are resized"
                    )
                )
                continue
            n_l = T.kernel_expr_in_launcher(src, kernel, ls, count, fn)
            if n_l is None:
                facts.append(
                    Precondition(
                        "grid_computable",
                        False,
                        f"{where}: element count '{T.squash(count)}' is not computable from launcher variables",
                    )
                )
                continue
            if lp.block == "1":
                need = n_l
            elif lp.block != "blockDim.x":
                b_k = T.eval_int(T.subst_idents(lp.block, T.template_map(src, kernel, ls)), consts)
                b_l = T.eval_int(block_text, consts)
                if b_k is None or (b_l is not None and b_k != b_l):
                    facts.append(
                        Precondition(
                            "stride_matches_block",
                            False,
                            f"{where}: kernel strides by {lp.block} but launches {block_text} threads",
                        )
                    )
                    continue
            if lp.block != "1":
                need = T.ceil_div(n_l, block_text)
            if re.fullmatch(r"\w+", grid_text.strip()):
                reused = T.ident_used_outside_launch(src, launcher, grid_text.strip(), ls)
                if reused:
                    facts.append(
                        Precondition(
                            "grid_not_reused",
                            False,
                            f"{where}: grid variable '{grid_text.strip()}' is also used at line {reused[0]} "
                            "(e.g. as a count of per-block results); resizing it changes that too",
                        )
                    )
                    continue
            if clean:
                new = need if re.fullmatch(r"\w+", n_l.strip("() ")) else _max(need, "1")
            else:
                new = _max(grid_text.strip(), need)
            grids[ls.start] = (ls, new)
            facts.append(Precondition("grid_computable", True, f"{where}: grid becomes {new}"))
        return facts, grids

    def removal_preconditions(self, src: CudaSource, site: Site) -> list[Precondition]:
        return _kinded(self._removal_facts(src, site))

    def _removal_facts(self, src: CudaSource, site: Site) -> list[Precondition]:
        lp, kernel, fn = self._loop(src, site)
        body = lp.node.child_by_field_name("body")
        facts = []
        # a block-stride loop's guard is block-uniform: barriers in its body stay legal
        syncs = T.calls_named(body, _SYNC) if lp.block != "1" else []
        facts.append(
            Precondition(
                "no_barrier_in_body",
                not syncs,
                f"body calls {T.call_name(syncs[0])} at line {syncs[0].start_point.row + 1}: with one element "
                "per thread the threads past n would skip it (divergent barrier)"
                if syncs
                else "no barrier or warp collective in the loop body",
            )
        )
        jumps = T.jumps_out(lp.node)
        facts.append(
            Precondition(
                "no_jump_out",
                not jumps,
                f"'{src.text_of(jumps[0]).strip()}' at line {jumps[0].start_point.row + 1} leaves the loop"
                if jumps
                else "no break/continue/return in the body",
            )
        )
        written = lp.var in T.assigned_in(body)
        facts.append(
            Precondition(
                "index_not_written",
                not written,
                f"the body writes the loop index {lp.var}" if written else "the body never writes the index",
            )
        )
        grid_use = T.uses_ident(body, "gridDim")
        facts.append(
            Precondition(
                "body_ignores_grid",
                not grid_use,
                "the body reads gridDim" if grid_use else "the body does not read gridDim",
            )
        )
        grid_facts, _ = self._grids(src, lp, kernel, fn)
        return facts + grid_facts

    def preconditions(self, src: CudaSource, site: Site) -> list[Precondition]:
        return _kinded(self._skill_facts(src, site))

    def _skill_facts(self, src: CudaSource, site: Site) -> list[Precondition]:
        if site.details.get("forward") == "1":
            return self._forward_facts(src, site)
        return [
            Precondition(
                "stride_is_grid",
                True,
                "the index advances by gridDim.x * block, so every element is visited once",
            ),
            *self._removal_facts(src, site),
        ]

    def _remove(self, src: CudaSource, site: Site) -> CudaSource:
        lp, kernel, fn = self._loop(src, site)
        _, grids = self._grids(src, lp, kernel, fn)
        body = lp.node.child_by_field_name("body")
        ind = edit.indent_of(src, lp.node)
        decl = f"{lp.var_type} {lp.var} = {lp.start};"
        guarded = f"if ({lp.var} < {lp.bound}) {src.text_of(body)}"
        if _name_redeclared_after(src, lp.node, lp.var):
            text = f"{{\n{ind}    {decl}\n{ind}    {guarded}\n{ind}}}"
        else:
            text = f"{decl}\n{ind}{guarded}"
        edits = [edit.replace(lp.node, text)]
        edits += [T.replace_grid(src, ls, g) for ls, g in grids.values()]
        return edit.apply_edits(src, edits)

    # ---- forward -----------------------------------------------------------------------------
    def find_forward(self, src: CudaSource) -> list[Site]:
        sites = []
        for k in src.kernels:
            fn = src.node_for(k)
            for decl, stmt, form in _one_per_thread(src, fn):
                var = T.decl_name(decl)
                sites.append(
                    self.site(
                        src,
                        stmt,
                        f"one element per thread ({var}) in {k.name} could grid-stride",
                        kernel=k.name,
                        var=var or "",
                        form=form,
                        forward="1",
                    )
                )
        return sites

    def _forward_parts(self, src: CudaSource, site: Site) -> tuple[ts.Node, ts.Node, str, Function, ts.Node]:
        kernel = src.kernel(site.details.get("kernel", ""))
        if kernel is None:
            raise Refused(f"{self.name}: kernel {site.details.get('kernel')} not found")
        fn = src.node_for(kernel)
        stmt = src.node_at(site.anchor)
        for decl, s, form in _one_per_thread(src, fn):
            if s == stmt:
                return decl, s, form, kernel, fn
        raise Refused(f"{self.name}: site at line {site.line} is no longer one element per thread")

    def _forward_facts(self, src: CudaSource, site: Site) -> list[Precondition]:
        decl, stmt, form, kernel, fn = self._forward_parts(src, site)
        body_nodes = _forward_body(stmt, form)
        facts = []
        bad_sync = [c for b in body_nodes for c in T.calls_named(b, _SYNC)]
        facts.append(
            Precondition(
                "no_barrier_in_body",
                not bad_sync,
                f"body calls {T.call_name(bad_sync[0])}: threads would loop different counts"
                if bad_sync
                else "no barrier or warp collective in the per-element code",
            )
        )
        rets = [
            n
            for b in body_nodes
            for n in T.walk(b)
            if n.type in ("return_statement", "break_statement", "continue_statement")
            and not _inner_loop_jump(n, b)
        ]
        facts.append(
            Precondition(
                "no_jump_out",
                not rets,
                "the per-element code returns early" if rets else "no early return in the per-element code",
            )
        )
        idx = [b for b in body_nodes if re.search(r"\b(blockIdx|threadIdx|gridDim)\b", src.text_of(b))]
        facts.append(
            Precondition(
                "index_only_through_var",
                not idx,
                "the per-element code reads blockIdx/threadIdx directly"
                if idx
                else "the per-element code sees the thread only through its element index",
            )
        )
        var = T.decl_name(decl) or ""
        written = any(var in T.assigned_in(b) for b in body_nodes)
        facts.append(
            Precondition(
                "index_not_written",
                not written,
                "the index is reassigned" if written else "the index is read only",
            )
        )
        loops = [
            n
            for b in body_nodes
            for n in T.walk(b)
            if n.type in ("for_statement", "while_statement", "do_statement")
        ]
        facts.append(
            Precondition(
                "straight_line_element",
                not loops,
                f"each thread walks a loop (line {loops[0].start_point.row + 1}): a thread per row or window, "
                "whose remedy is a row layout (a warp or a block per row), which reads the one-per-thread form"
                if loops
                else "the per-element code has no loop",
                "Layout",
            )
        )
        try:
            copy = strided_copy.analyze(src, kernel)
            transposed = copy.transposed is not None
        except strided_copy.NotACopy:
            transposed = False
        facts.append(
            Precondition(
                "not_a_strided_copy",
                not transposed,
                "a transpose or permute: coalesced on one side only whatever the grid; its remedy is a "
                "shared-memory tile, which reads the one-element-per-thread form"
                if transposed
                else "not a strided copy",
                "Layout",
            )
        )
        gain = _amortized(src, fn, decl, body_nodes)
        facts.append(
            Precondition(
                "work_to_amortize",
                gain is not None,
                gain
                if gain is not None
                else "each thread maps one element with nothing per thread or per block to share "
                "(no atomics, no shared memory, no setup that reads memory): the launch already covers "
                "the problem and the loop only adds its own index math",
                "Pipeline",
            )
        )
        launches = T.launches_of(src, kernel.name)
        facts.append(
            Precondition(
                "launch_in_file",
                bool(launches),
                f"{len(launches)} launch(es) of {kernel.name} to cap" if launches else "no launch to cap",
            )
        )
        return facts

    def shape_preconditions(
        self, src: CudaSource, site: Site, bench: Sequence[LaunchValues]
    ) -> list[Precondition]:
        if site.details.get("forward") != "1" or not bench:
            return []
        cap = T.eval_int(GRID_CAP, {})
        grids = [
            g
            for ls in T.launches_of(src, site.details.get("kernel", ""))
            for g in T.grid_sizes(src, ls, bench)
        ]
        within = bool(grids) and all(g is not None and cap is not None and g <= cap for g in grids)
        return [
            Precondition(
                "grid_exceeds_one_wave",
                not within,
                f"at every bench size the grid is {sorted(set(grids))} blocks, within the {GRID_CAP} cap: "
                "each thread would still take one element"
                if within
                else "the grid outgrows one wave at some bench size (or cannot be evaluated)",
                "Hardware",
            )
        ]

    def _apply(self, src: CudaSource, site: Site) -> CudaSource:
        decl, stmt, form, kernel, fn = self._forward_parts(src, site)
        var = T.decl_name(decl) or "i"
        init = decl.child_by_field_name("declarator").child_by_field_name("value")
        ty = decl.child_by_field_name("type")
        start = src.text_of(init)
        block = T.global_tid(T.resolve_local(src, fn, start)) or "blockDim.x"
        ind = edit.indent_of(src, stmt)
        if form == "if":
            cond = stmt.child_by_field_name("condition")
            bound = src.text_of(cond.named_children[0].child_by_field_name("right"))
            body = src.text_of(stmt.child_by_field_name("consequence"))
            new = f"for ({src.text_of(ty)} {var} = {start}; {var} < {bound}; {var} += gridDim.x * {block}) {body}"
            edits = [edit.replace(stmt, new)]
        else:
            cond = stmt.child_by_field_name("condition")
            bound = src.text_of(cond.named_children[0].child_by_field_name("right"))
            rest = _rest_after(stmt)
            inner = src.text_of((rest[0].start_byte, rest[-1].end_byte))
            new = (
                f"for ({src.text_of(ty)} {var} = {start}; {var} < {bound}; {var} += gridDim.x * {block}) {{\n"
                f"{ind}    {inner}\n{ind}}}"
            )
            edits = [edit.Edit(stmt.start_byte, rest[-1].end_byte, new)]
        edits.append(edit.delete(src, decl))
        for ls in T.launches_of(src, kernel.name):
            g = T.config_nodes(src, ls)[0]
            gt = src.text_of(g).strip()
            edits.append(edit.replace(g, _min(gt, GRID_CAP)))
        return edit.apply_edits(src, edits)


_ATOMIC = r"atomic\w+"


def _amortized(src: CudaSource, fn: ts.Node, decl: ts.Node, body: list[ts.Node]) -> str | None:
    """What a grid-stride loop would spread over many elements, or None: a thread that maps one
    element and shares nothing gains no work to amortize from looping, only the loop's overhead.
    Global atomics (a block can aggregate them once it sees many elements), shared memory (filled
    once per block) and setup before the element that reads memory or loops are such work."""
    atomics = [c for b in body for c in T.calls_named(b, _ATOMIC)]
    if atomics:
        return f"the element's update is {T.call_name(atomics[0])}: a block that sees many elements can aggregate it"
    if "__shared__" in src.text_of(fn):
        return "the kernel fills shared memory, once per block"
    var = T.decl_name(decl) or ""
    top = fn.child_by_field_name("body")
    setup = [
        s
        for s in (top.named_children if top is not None else [])
        if s.end_byte <= decl.start_byte and not (var and T.uses_ident(s, var))
    ]
    for s in setup:
        reads = [
            n
            for n in T.walk(s)
            if n.type in ("subscript_expression", "for_statement", "while_statement", "do_statement")
            or (n.type == "pointer_expression" and n.children[0].type == "*")
        ]
        if reads:
            return f"per-thread setup before the element reads memory or loops (line {s.start_point.row + 1})"
    return None


def _max(a: str, b: str) -> str:
    """max as a conditional expression (host code has no int max() without <algorithm>)."""
    a, b = T.paren(a), T.paren(b)
    return f"({a} > {b} ? {a} : {b})"


def _min(a: str, b: str) -> str:
    a, b = T.paren(a), T.paren(b)
    return f"({a} < {b} ? {a} : {b})"


def _is_dim3(src: CudaSource, launcher: ts.Node, text: str) -> bool:
    t = text.strip()
    if t.startswith("dim3"):
        return True
    if re.fullmatch(r"\w+", t):
        for n in T.walk(launcher):
            if n.type == "declaration" and T.decl_name(n) == t:
                return "dim3" in src.text_of(n.child_by_field_name("type"))
    return False


def _name_redeclared_after(src: CudaSource, node: ts.Node, name: str) -> bool:
    parent = node.parent
    if parent is None or parent.type != "compound_statement":
        return True
    for sib in parent.named_children:
        if sib.start_byte <= node.start_byte:
            if sib.start_byte < node.start_byte and sib.type == "declaration" and name in _declared(sib):
                return True
            continue
        if sib.type == "declaration" and name in _declared(sib):
            return True
    return False


def _declared(decl: ts.Node) -> set[str]:
    return {T.declarator_ident(d) or "" for d in decl.children_by_field_name("declarator")}


def _inner_loop_jump(n: ts.Node, top: ts.Node) -> bool:
    if n.type == "return_statement":
        return False
    p = n.parent
    while p is not None and p != top.parent:
        if p.type in ("for_statement", "while_statement", "do_statement", "switch_statement"):
            return True
        p = p.parent
    return False


def _rest_after(stmt: ts.Node) -> list[ts.Node]:
    parent = stmt.parent
    return (
        [s for s in parent.named_children if s.start_byte > stmt.start_byte and s.type != "comment"]
        if parent
        else []
    )


def _forward_body(stmt: ts.Node, form: str) -> list[ts.Node]:
    if form == "if":
        return [stmt.child_by_field_name("consequence")]
    return _rest_after(stmt)


def _one_per_thread(src: CudaSource, fn: ts.Node) -> list[tuple[ts.Node, ts.Node, str]]:
    """(declaration of i = global thread index, the guard statement, 'if' | 'return') pairs."""
    out = []
    for decl in T.walk(fn):
        if decl.type != "declaration" or decl.parent is None or decl.parent.type != "compound_statement":
            continue
        ds = decl.children_by_field_name("declarator")
        if len(ds) != 1 or ds[0].type != "init_declarator":
            continue
        value = ds[0].child_by_field_name("value")
        if value is None or T.global_tid(src.text_of(value)) is None:
            continue
        var = T.decl_name(decl)
        if not var:
            continue
        sibs = [s for s in decl.parent.named_children if s.type != "comment"]
        after = sibs[sibs.index(decl) + 1 :]
        guard = next((s for s in after if T.uses_ident(s, var)), None)
        if (
            guard is None
            or guard.type != "if_statement"
            or guard.child_by_field_name("alternative") is not None
        ):
            continue
        cond = guard.child_by_field_name("condition")
        expr = cond.named_children[0] if cond is not None and cond.named_children else None
        if (
            expr is None
            or expr.type != "binary_expression"
            or T.squash(src.text_of(expr.child_by_field_name("left"))) != var
        ):
            continue
        op = expr.child_by_field_name("operator").type
        cons = guard.child_by_field_name("consequence")
        later = after[after.index(guard) + 1 :]
        if op == "<" and not any(T.uses_ident(s, var) for s in later):
            out.append((decl, guard, "if"))
        elif (
            op == ">="
            and cons is not None
            and (
                cons.type == "return_statement"
                or (
                    cons.type == "compound_statement"
                    and [c.type for c in cons.named_children] == ["return_statement"]
                )
            )
            and later
        ):
            out.append((decl, guard, "return"))
    return out
