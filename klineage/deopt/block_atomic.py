"""Block-level pre-reduction + one atomic per block:
`s = block_reduce_sum(partial); if (threadIdx.x == 0) atomicAdd(out, s);`.

Contended atomics on one address serialize in the memory system; reducing inside the block first
(shuffles and shared memory) cuts the atomics from one per thread to one per block. Removing it
lets every thread add its own partial atomically and drops the block reduction. With floating
point the order of the additions (and so the rounding) then changes from run to run: workloads
that use it declare `nondeterminism_tolerated=True`.

Recognised idiom: the block (or warp) sum comes from a call to a reduction function of the file
(one with shuffles or barriers) or `cg::reduce`, and the atomic is guarded to one thread.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import tree_sitter as ts

from klineage.deopt import _threads as T
from klineage.deopt import warp_shuffle_reduce as W
from klineage.deopt.base import Operator, Precondition, Refused, Site
from klineage.source import edit
from klineage.source.model import CudaSource

_ATOMIC = r"atomicAdd|atomicMax|atomicMin|atomicAdd_block|atomicAdd_system"
_HELPER = "block_sum_for_atomic"


@dataclass(frozen=True)
class _Guarded:
    guard: ts.Node  # the if statement
    atomic: ts.Node  # the atomic call
    op: str
    value: str  # the reduced value's name
    level: str  # block | warp
    producer: ts.Node | None  # statement that reduces into value
    partial: str  # the per-thread value fed to the reduction
    reducer: str  # reduction function name
    why: str


def _one_thread(src: CudaSource, fn: ts.Node, cond: str) -> str | None:
    """'block' when `cond` selects thread 0 of the block, 'warp' for lane 0 of each warp."""
    c = T.squash(cond).strip("()")
    parts = c.split("&&")
    xs = []
    for p in parts:
        p = p.strip("()")
        m = re.fullmatch(r"(.+)==0|0==(.+)|!(.+)", p)
        if not m:
            return None
        lhs = next(g for g in m.groups() if g)
        lhs = T.strip_casts(T.resolve_local(src, fn, lhs))
        xs.append(lhs)
    if any(x == "threadIdx.x" for x in xs):
        return "block"
    if any(
        re.fullmatch(r"\(?threadIdx\.x\)?(?:%32|&31|%warpSize|&\(warpSize-1\))", x) or _is_lane_expr(src, x)
        for x in xs
    ):
        return "warp"
    return None


def _is_lane_expr(src: CudaSource, x: str) -> bool:
    m = re.fullmatch(r"\(?threadIdx\.x\)?(%|&)\(?(\w+)(-1)?\)?", x)
    if not m:
        return False
    v = T.eval_int(m.group(2), T.file_constants(src))
    return v is not None and (
        (m.group(1) == "%" and v == 32) or (m.group(1) == "&" and (v == 31 or (m.group(3) and v == 32)))
    )


def _reducer_kind(src: CudaSource, name: str, depth: int = 0) -> tuple[str, str] | None:
    """(level, combiner) of a reduction function defined in the file, or None."""
    fn = next((src.node_for(f) for f in src.functions if f.name == name and f.kind == "device"), None)
    if fn is None or depth > 3:
        return None
    reds = [r for f, r in W.reductions(src) if f == fn]
    level = "block" if T.has_call(fn, r"__syncthreads") else "warp"
    combs = {r.combiner for r in reds if r.combiner}
    for c in T.calls_named(fn, r"\w+"):
        sub = _reducer_kind(src, T.call_name(c), depth + 1)
        if sub is not None:
            combs.add(sub[1])
            level = "block" if sub[0] == "block" or level == "block" else "warp"
    if not combs and not reds:
        return None
    return level, (combs.pop() if len(combs) == 1 else "")


def _atomic_for(comb: str) -> str | None:
    if comb == "{a} + {b}":
        return "atomicAdd"
    if comb.startswith(("fmaxf(", "max(", "fmax(")):
        return "atomicMax"
    if comb.startswith(("fminf(", "min(", "fmin(")):
        return "atomicMin"
    return None


def _producer(src: CudaSource, fn: ts.Node, guard: ts.Node, value: str) -> ts.Node | None:
    """The last statement before `guard` (in enclosing blocks) that writes `value`."""
    best = None
    for n in T.walk(fn):
        if n.start_byte >= guard.start_byte:
            break
        if n.type == "declaration" and value in {
            T.declarator_ident(d) for d in n.children_by_field_name("declarator")
        }:
            best = n
        elif n.type == "expression_statement" and value in T.assigned_in(n):
            best = n
    return best


def _guarded(src: CudaSource, fn: ts.Node, guard: ts.Node) -> _Guarded | None:
    cond = guard.child_by_field_name("condition")
    cons = guard.child_by_field_name("consequence")
    if cond is None or cons is None or guard.child_by_field_name("alternative") is not None:
        return None
    stmts = (
        [c for c in cons.named_children if c.type != "comment"]
        if cons.type == "compound_statement"
        else [cons]
    )
    if len(stmts) != 1 or stmts[0].type != "expression_statement":
        return None
    calls = T.calls_named(stmts[0], _ATOMIC)
    if len(calls) != 1 or stmts[0].named_children[0] != calls[0]:
        return None
    level = _one_thread(src, fn, src.text_of(cond))
    if level is None:
        return None
    atomic = calls[0]
    args = T.call_args(atomic)
    if len(args) != 2:
        return None
    value = T.squash(src.text_of(args[1]))
    why = ""
    prod = _producer(src, fn, guard, value) if re.fullmatch(r"\w+", value) else None
    partial, reducer = "", ""
    if prod is None:
        why = f"no statement reduces '{value}' before the atomic"
    else:
        rcalls = [
            c
            for c in T.calls_named(prod, r"[\w:]+")
            if c.parent is not None
            and (
                c.parent.type == "init_declarator"
                or (
                    c.parent.type == "assignment_expression"
                    and c.parent.child_by_field_name("operator").type == "="
                    and c.parent.child_by_field_name("right") == c
                )
            )
        ]
        call = rcalls[0] if rcalls else None
        if call is None:
            why = f"'{value}' is not the result of a reduction call (inline reduction code is not recognised)"
        else:
            reducer = T.call_name(call)
            cargs = T.call_args(call)
            if reducer in ("cg::reduce", "cooperative_groups::reduce") and len(cargs) == 3:
                partial = src.text_of(cargs[1])
            elif cargs:
                partial = src.text_of(cargs[0])
            else:
                why = f"{reducer}() takes no value"
    return _Guarded(guard, atomic, T.call_name(atomic), value, level, prod, partial, reducer, why)


class BlockAtomic(Operator):
    name = "block_atomic"
    category = "fusion"
    intent = (
        "Reduce inside the block (shuffles + shared memory) and issue one atomic per block instead of "
        "one contended atomic per thread."
    )
    mechanical_apply = True

    def find(self, src: CudaSource) -> list[Site]:
        sites = []
        for k in src.kernels:
            fn = src.node_for(k)
            for n in T.walk(fn):
                if n.type == "if_statement":
                    g = _guarded(src, fn, n)
                    if g is not None:
                        sites.append(
                            self.site(
                                src,
                                n,
                                f"one {g.op} per {g.level} of {g.value} in {k.name}",
                                kernel=k.name,
                                op=g.op,
                                level=g.level,
                                value=g.value,
                                reducer=g.reducer or "?",
                            )
                        )
        return sites

    def _g(self, src: CudaSource, site: Site) -> tuple[_Guarded, ts.Node]:
        node = src.node_at(site.anchor)
        k = src.kernel(site.details.get("kernel"))
        if node is None or k is None:
            raise Refused(f"{self.name}: site {site.anchor} not found")
        fn = src.node_for(k)
        g = _guarded(src, fn, node)
        if g is None:
            raise Refused(f"{self.name}: no guarded atomic at line {site.line}")
        return g, fn

    def removal_preconditions(self, src: CudaSource, site: Site) -> list[Precondition]:
        g, fn = self._g(src, site)
        facts = [
            Precondition(
                "reduction_recognised",
                not g.why,
                g.why or f"{g.value} = {g.reducer}({g.partial})",
                "Pipeline",
            )
        ]
        if g.why:
            return facts
        kind = (
            (g.level, "{a} + {b}")
            if g.reducer in ("cg::reduce", "cooperative_groups::reduce")
            else _reducer_kind(src, g.reducer)
        )
        if g.reducer.endswith("reduce") and "cg::" in g.reducer:
            op_txt = T.squash(
                src.text_of(
                    T.call_args(T.calls_named(g.producer, r"(?:cg|cooperative_groups)::reduce")[0])[2]
                )
            )
            kind = (
                g.level,
                "{a} + {b}"
                if "plus" in op_txt
                else "fmaxf({a}, {b})"
                if "greater" in op_txt
                else "fminf({a}, {b})"
                if "less" in op_txt
                else "",
            )
        facts.append(
            Precondition(
                "reduction_function",
                kind is not None,
                f"{g.reducer} reduces over the {kind[0]}"
                if kind
                else f"{g.reducer} is not a reduction of this file",
                "Pipeline",
            )
        )
        if kind is None:
            return facts
        want = _atomic_for(kind[1])
        facts.append(
            Precondition(
                "combiner_matches_atomic",
                want == g.op.replace("_block", "").replace("_system", ""),
                f"{g.reducer} combines with {kind[1].format(a='a', b='b') or 'an unknown operator'}, "
                f"the atomic is {g.op}",
                "Data types",
            )
        )
        facts.append(
            Precondition(
                "guard_level_matches",
                kind[0] == g.level,
                f"{g.level}-level guard over a {kind[0]}-level reduction",
                "Layout",
            )
        )
        uses = [
            n
            for n in T.walk(fn)
            if n.type == "identifier"
            and n.text == g.value.encode()
            and n.start_byte > g.producer.end_byte
            and not (g.guard.start_byte <= n.start_byte < g.guard.end_byte)
        ]
        facts.append(
            Precondition(
                "reduced_value_only_for_atomic",
                not uses,
                f"{g.value} is also used at line {uses[0].start_point.row + 1}"
                if uses
                else f"{g.value} feeds only the atomic",
                "Pipeline",
            )
        )
        return facts

    def preconditions(self, src: CudaSource, site: Site) -> list[Precondition]:
        if site.details.get("forward") == "1":
            return self._forward_facts(src, site)
        facts = list(self.removal_preconditions(src, site))
        facts.append(
            Precondition(
                "order_tolerant_output",
                True,
                "float atomics make the sum's rounding order-dependent: the workload must tolerate "
                "nondeterminism (nondeterminism_tolerated=True)",
                "Data types",
            )
        )
        return facts

    def _remove(self, src: CudaSource, site: Site) -> CudaSource:
        g, fn = self._g(src, site)
        assert g.producer is not None
        edits = []
        if g.producer.type == "declaration":
            ty = src.text_of(g.producer.child_by_field_name("type"))
            quals = " ".join(src.text_of(c) for c in g.producer.children if c.type == "type_qualifier")
            edits.append(
                edit.replace(g.producer, f"{(quals + ' ') if quals else ''}{ty} {g.value} = {g.partial};")
            )
        elif T.squash(g.partial) == g.value:
            edits.append(edit.delete(src, g.producer))
        else:
            edits.append(edit.replace(g.producer, f"{g.value} = {g.partial};"))
        edits.append(edit.replace(g.guard, src.text_of(g.atomic) + ";"))
        return edit.apply_edits(src, edits)

    # ---- forward: per-thread atomic -> block reduction + one atomic ------------------------------
    def find_forward(self, src: CudaSource) -> list[Site]:
        sites = []
        for k in src.kernels:
            fn = src.node_for(k)
            for call in T.calls_named(fn, r"atomicAdd"):
                stmt = call.parent
                if stmt is None or stmt.type != "expression_statement" or stmt.parent is None:
                    continue
                if any(
                    g.type == "if_statement" and _guarded(src, fn, g) is not None
                    for g, _ in T.guards(src, stmt)
                ):
                    continue
                sites.append(
                    self.site(
                        src,
                        stmt,
                        f"per-thread atomicAdd in {k.name} could pre-reduce per block",
                        kernel=k.name,
                        forward="1",
                    )
                )
        return sites

    def _forward_facts(self, src: CudaSource, site: Site) -> list[Precondition]:
        stmt = src.node_at(site.anchor)
        if stmt is None:
            raise Refused(f"{self.name}: site {site.anchor} not found")
        fn = T.fn_node_of(stmt)
        facts = []
        gs = T.guards(src, stmt)
        facts.append(
            Precondition(
                "reached_by_all_threads",
                not gs,
                f"the atomic sits under '{T.squash(gs[0][1])}': a block barrier there would diverge"
                if gs
                else "every thread of the block reaches the atomic (barriers are legal)",
                "Pipeline",
            )
        )
        loops = [
            p for p in T.ancestors(stmt, fn) if p.type in ("for_statement", "while_statement", "do_statement")
        ]
        facts.append(
            Precondition(
                "outside_loops",
                not loops,
                "the atomic is inside a loop" if loops else "not inside a loop",
                "Pipeline",
            )
        )
        call = stmt.named_children[0]
        val = T.call_args(call)[1] if len(T.call_args(call)) == 2 else None
        ty = (
            W.value_type(src, fn, T.squash(src.text_of(val)))
            if val is not None and val.type == "identifier"
            else None
        )
        facts.append(
            Precondition(
                "value_type_known",
                ty is not None,
                f"value type {ty}" if ty else "the added value is not a typed local",
                "Data types",
            )
        )
        kernel = site.details.get("kernel", "")
        consts = T.file_constants(src)
        blocks = [
            T.eval_int(src.text_of(T.config_nodes(src, ls)[1]), consts) for ls in T.launches_of(src, kernel)
        ]
        ok = bool(blocks) and all(b is not None and b % 32 == 0 and b <= 1024 for b in blocks)
        facts.append(
            Precondition(
                "block_multiple_of_32",
                ok,
                f"blocks of {blocks} threads"
                if ok
                else f"block sizes {blocks} not all known multiples of 32",
                "Hardware",
            )
        )
        uses_y = bool(re.search(r"threadIdx\.[yz]", src.text_of(fn)))
        facts.append(
            Precondition(
                "one_dimensional_block",
                not uses_y,
                "kernel uses threadIdx.y/z" if uses_y else "1-D thread blocks",
                "Layout",
            )
        )
        return facts

    def _apply(self, src: CudaSource, site: Site) -> CudaSource:
        stmt = src.node_at(site.anchor)
        assert stmt is not None
        fn = T.fn_node_of(stmt)
        call = stmt.named_children[0]
        ptr, val = (src.text_of(a) for a in T.call_args(call))
        ty = W.value_type(src, fn, T.squash(val)) or "float"
        ind = edit.indent_of(src, stmt)
        text = (
            f"{{\n{ind}    const {ty} block_total = {_HELPER}({val});\n"
            f"{ind}    if (threadIdx.x == 0) atomicAdd({ptr}, block_total);\n{ind}}}"
        )
        edits = [edit.replace(stmt, text)]
        if _HELPER not in src.text:
            top = fn.parent if fn.parent is not None and fn.parent.type == "template_declaration" else fn
            edits.append(edit.insert_before(top, _HELPER_TEXT))
        return edit.apply_edits(src, edits)


_HELPER_TEXT = f"""// Sum over the block (1-D, a multiple of 32 threads); the result is valid in thread 0.
template <typename T>
__device__ __forceinline__ T {_HELPER}(T v) {{
    __shared__ T warp_part[32];
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
#pragma unroll
    for (int off = 16; off > 0; off >>= 1) v += __shfl_xor_sync(0xffffffffu, v, off);
    __syncthreads();  // a previous call may still read warp_part
    if (lane == 0) warp_part[warp] = v;
    __syncthreads();
    v = T(0);
    if (warp == 0) {{
        v = lane < (int)(blockDim.x >> 5) ? warp_part[lane] : T(0);
#pragma unroll
        for (int off = 16; off > 0; off >>= 1) v += __shfl_xor_sync(0xffffffffu, v, off);
    }}
    return v;
}}

"""
