"""Warp-shuffle reductions: `for (off = 16; off > 0; off >>= 1) v += __shfl_down_sync(mask, v, off)`
(also `__shfl_xor_sync` butterflies, max/min/functor combiners and the five-statement unrolled form).

Shuffles exchange registers inside a warp: no shared-memory traffic, no barriers, five dependent
steps. Removing the technique gives a shared-memory tree over a per-warp buffer with `__syncwarp()`
between halving steps. A per-warp buffer keeps the replacement legal wherever the full-mask
shuffle was (inside `if (warp == 0)` too): `__syncwarp()` needs only the warp, not the block.

Semantics: an xor butterfly leaves the result in every lane; a down-reduction only in lane 0. The
tree computes lane 0's value with the same association order as both shuffle forms and then
broadcasts it to every lane (`v = buf[warp][0]`), which covers both (down-reduction lanes other
than 0 held partial sums that correct code never reads).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import tree_sitter as ts

from klineage.deopt import _threads as T
from klineage.deopt.base import Operator, Precondition, Refused, Site
from klineage.source import edit
from klineage.source import nodes as N
from klineage.source.model import CudaSource

_SHFL = r"__shfl_(?:down|xor)_sync"
_FUNCS = {"fmaxf", "fminf", "fmax", "fmin", "max", "min", "__hmax", "__hmin"}
_FULL = 0xFFFFFFFF


@dataclass(frozen=True)
class _Red:
    first: ts.Node  # the loop, or the first unrolled statement
    last: ts.Node
    form: str  # loop | unrolled
    kind: str  # down | xor
    var: str
    combiner: str  # "a + b" style template with {a} {b}, or "" if not recognised
    mask: str
    start: int | None
    width: str | None
    why: str  # why the body is not recognised ("" when it is)
    shuffled: tuple[str, ...] = ()  # merge form: the values exchanged each step (e.g. m, d or s.n, s.mean)
    offset_var: str = ""
    guard: str = ""  # a warp-uniform condition on the offset each step is taken under ("" = always)


def _uniform_guard(src: CudaSource, stmt: ts.Node, off: str) -> tuple[ts.Node, str] | None:
    """(the guarded step, its condition) of `if (COND) step;` when COND reads only the offset and
    names the function never assigns (template and kernel parameters, constants): every lane of
    the warp takes the same branch, so the step is skipped by the whole warp or by none. Liu's
    `if (blockSize >= 2 * off) v += __shfl_down_sync(...)` is the rolled template-unrolled form."""
    if stmt.type == "compound_statement":
        inner = [c for c in stmt.named_children if c.type != "comment"]
        if len(inner) != 1:
            return None
        stmt = inner[0]
    if stmt.type != "if_statement" or stmt.child_by_field_name("alternative") is not None:
        return None
    cond, then = stmt.child_by_field_name("condition"), stmt.child_by_field_name("consequence")
    if cond is None or then is None:
        return None
    fn = T.fn_node_of(stmt)
    decls = T.local_decls(fn) if fn is not None else {}
    params = {
        k for k, d in decls.items() if d.parent is not None and d.parent.type == "parameter_declaration"
    }
    local = (set(decls) - params) | (T.assigned_in(fn) if fn is not None else set())
    names = {src.text_of(n) for n in T.walk(cond) if n.type == "identifier"}
    if T.has_call(cond, r"\w+") or re.search(r"\bthreadIdx\b", src.text_of(cond)):
        return None
    if any(n in local and n != off for n in names) or T.assigned_in(cond):
        return None
    text = src.text_of(cond).strip()
    if text.startswith("(") and text.endswith(")"):
        text = text[1:-1].strip()
    return then, text


def _combiner(src: CudaSource, stmt: ts.Node, off_ok) -> tuple[str, str, ts.Node | None, str]:
    """(var, combiner template, shuffle call, why-not) of `v op= SHFL(mask, v, off)`-like statements."""
    if stmt.type == "compound_statement":
        inner = [c for c in stmt.named_children if c.type != "comment"]
        if len(inner) != 1:
            return "", "", None, f"{len(inner)} statements per step (several values or a custom merge)"
        stmt = inner[0]
    if stmt.type != "expression_statement" or not stmt.named_children:
        return "", "", None, "the step is not a single assignment"
    e = stmt.named_children[0]
    if e.type != "assignment_expression":
        return "", "", None, "the step is not a single assignment"
    left, right = e.child_by_field_name("left"), e.child_by_field_name("right")
    op = e.child_by_field_name("operator").type
    if left.type != "identifier":
        return "", "", None, "the reduced value is not a plain variable"
    var = src.text_of(left)
    calls = T.calls_named(right, _SHFL)
    if len(calls) != 1:
        return var, "", None, "not exactly one shuffle per step"
    call = calls[0]
    args = T.call_args(call)
    if len(args) < 3 or T.squash(src.text_of(args[1])) != var or not off_ok(args[2]):
        return var, "", call, "the shuffle does not exchange the reduced variable by the step offset"
    if op in ("+=", "*=", "&=", "|=", "^=") and right == call:
        sym = op[0]
        return var, f"{{a}} {sym} {{b}}", call, ""
    if op != "=":
        return var, "", call, f"combiner '{op}' not recognised"
    if right.type == "binary_expression" and right.child_by_field_name("operator").type in (
        "+",
        "*",
        "&",
        "|",
        "^",
    ):
        a, b = right.child_by_field_name("left"), right.child_by_field_name("right")
        sym = right.child_by_field_name("operator").type
        if {T.squash(src.text_of(a)), T.squash(src.text_of(b))} == {var, T.squash(src.text_of(call))}:
            return var, f"{{a}} {sym} {{b}}", call, ""
    if right.type == "call_expression" and right != call:
        name = T.call_name(right)
        cargs = T.call_args(right)
        if len(cargs) == 2 and {T.squash(src.text_of(cargs[0])), T.squash(src.text_of(cargs[1]))} == {
            var,
            T.squash(src.text_of(call)),
        }:
            if name in _FUNCS or re.fullmatch(r"\w+", name):
                return var, f"{name}({{a}}, {{b}})", call, ""
    return var, "", call, "combiner not recognised"


def _loop_red(src: CudaSource, node: ts.Node) -> _Red | None:
    init, cond, upd = (node.child_by_field_name(f) for f in ("initializer", "condition", "update"))
    body = node.child_by_field_name("body")
    if init is None or cond is None or upd is None or body is None:
        return None
    shfls = T.calls_named(body, _SHFL)
    if not shfls:
        return None
    if init.type == "declaration":
        off = T.decl_name(init)
        value = init.children_by_field_name("declarator")[0].child_by_field_name("value")
    elif init.type == "assignment_expression":
        off = T.squash(src.text_of(init.child_by_field_name("left")))
        value = init.child_by_field_name("right")
    else:
        return None
    if (
        not off
        or value is None
        or not any(T.squash(src.text_of(a)) == off for c in shfls for a in T.call_args(c)[2:3])
    ):
        return None
    consts = T.file_constants(src)
    start = T.eval_int(src.text_of(value), consts)
    if start is None:
        return (
            None  # offsets depend on an outer loop: an exchange network (e.g. bitonic sort), not a reduction
        )
    c, u = T.squash(src.text_of(cond)), T.squash(src.text_of(upd))
    halves = u in (f"{off}>>=1", f"{off}/=2", f"{off}={off}/2", f"{off}={off}>>1")
    ends = c in (f"{off}>0", f"{off}>=1", f"{off}!=0", f"0<{off}")
    guarded = _uniform_guard(src, body, off)
    step, guard = guarded if guarded is not None else (body, "")
    var, comb, call, why = _combiner(src, step, lambda a: T.squash(src.text_of(a)) == off)
    call = call or shfls[0]
    if why and "statements per step" in why:
        merged = _merge_form(src, body, off, shfls)
        if isinstance(merged, tuple):
            red = _make(
                src,
                node,
                node,
                "merge",
                "",
                "merge",
                shfls[0],
                start,
                "" if halves and ends else f"offsets do not halve to 1 ('{c}', '{u}')",
            )
            return _replace_fields(red, shuffled=merged, combiner="merge", offset_var=off)
        why = merged
    if not (halves and ends):
        why = why or f"offsets do not halve to 1 ('{c}', '{u}')"
    red = _make(src, node, node, "loop", var, comb, call, start, why)
    return _replace_fields(red, guard=guard, offset_var=off) if guard else red


def _replace_fields(r: _Red, **kw: object) -> _Red:
    from dataclasses import replace

    return replace(r, **kw)  # type: ignore[arg-type]


def _merge_form(src: CudaSource, body: ts.Node, off: str, shfls: list[ts.Node]) -> tuple[str, ...] | str:
    """The values a multi-value merge step exchanges (each shuffle the whole right side of an
    assignment or initializer, same kind and mask, by the step offset), or why it is not one."""
    kinds = {T.call_name(c) for c in shfls}
    masks = {T.squash(src.text_of(T.call_args(c)[0])) for c in shfls if T.call_args(c)}
    if len(kinds) != 1 or len(masks) != 1:
        return "the step mixes shuffle kinds or masks"
    values = []
    for c in shfls:
        args = T.call_args(c)
        if len(args) < 3 or T.squash(src.text_of(args[2])) != off or len(args) > 3:
            return "a shuffle does not move by the step offset"
        p = c.parent
        whole = p is not None and (
            p.type == "init_declarator"
            or (
                p.type == "assignment_expression"
                and p.child_by_field_name("right") == c
                and p.child_by_field_name("operator").type == "="
            )
        )
        if not whole:
            return "a shuffle is part of a larger expression"
        x = T.squash(src.text_of(args[1]))
        if not re.fullmatch(r"[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)*", x):
            return f"shuffled value '{x}' is not a variable or field"
        values.append(x)
    if T.has_call(body, r"__syncthreads\w*|__syncwarp|__shfl_sync|__ballot_sync"):
        return "the step also synchronizes or broadcasts"
    return tuple(dict.fromkeys(values))


def _make(
    src: CudaSource,
    first: ts.Node,
    last: ts.Node,
    form: str,
    var: str,
    comb: str,
    call: ts.Node | None,
    start: int | None,
    why: str,
) -> _Red:
    kind, mask, width = "down", "", None
    if call is not None:
        kind = "xor" if "xor" in T.call_name(call) else "down"
        args = T.call_args(call)
        mask = src.text_of(args[0]) if args else ""
        width = src.text_of(args[3]) if len(args) > 3 else None
    return _Red(first, last, form, kind, var, comb if not why else "", mask, start, width, why)


def _unrolled(src: CudaSource, fn: ts.Node) -> list[_Red]:
    """Runs of five statements `v op= SHFL(mask, v, 16|8|4|2|1)` in one block."""
    out = []
    for block in T.walk(fn):
        if block.type != "compound_statement":
            continue
        stmts = [s for s in block.named_children if s.type != "comment"]
        i = 0
        while i + 5 <= len(stmts):
            run = stmts[i : i + 5]
            parsed = []
            for want, s in zip((16, 8, 4, 2, 1), run, strict=True):
                var, comb, call, why = _combiner(
                    src, s, lambda a, w=want: T.eval_int(src.text_of(a), {}) == w
                )
                if why or call is None:
                    break
                parsed.append((var, comb, call))
            if len(parsed) == 5 and len({(v, c, T.call_name(k)) for v, c, k in parsed}) == 1:
                var, comb, call = parsed[0]
                out.append(_make(src, run[0], run[-1], "unrolled", var, comb, call, 16, ""))
                i += 5
            else:
                i += 1
    return out


def reductions(src: CudaSource) -> list[tuple[ts.Node, _Red]]:
    """Every warp-shuffle reduction (loop or unrolled) in the file's kernels and device functions,
    with its function, in source order (the block-level operators find their shuffles here)."""
    out = []
    for f in src.functions:
        if f.kind not in ("kernel", "device"):
            continue
        fn = src.node_for(f)
        for n in T.walk(fn):
            if n.type == "for_statement":
                r = _loop_red(src, n)
                if r is not None:
                    out.append((fn, r))
        out += [(fn, r) for r in _unrolled(src, fn)]
    return sorted(out, key=lambda p: p[1].first.start_byte)


def linear_tid(src: CudaSource) -> str:
    """The linear thread index (lanes and warps are formed from it)."""
    if re.search(r"threadIdx\.[yz]|blockDim\.[yz]|dim3", src.text):
        return "((threadIdx.z * blockDim.y + threadIdx.y) * blockDim.x + threadIdx.x)"
    return "threadIdx.x"


def value_type(src: CudaSource, fn: ts.Node, var: str) -> str | None:
    """The declared C type of the scalar `var` in `fn` (None when it is no scalar declared there)."""
    decls = T.local_decls(fn)
    d = decls.get(var)
    if d is None:
        return None
    decl = d.parent
    while decl is not None and decl.type not in ("declaration", "parameter_declaration"):
        decl = decl.parent
    if decl is None or d.type in ("pointer_declarator", "array_declarator"):
        return None
    ty = decl.child_by_field_name("type")
    if ty is None:
        return None
    quals = [
        src.text_of(c) for c in decl.children if c.type == "type_qualifier" and src.text_of(c) != "const"
    ]
    return " ".join([*quals, src.text_of(ty)]).strip()


class WarpShuffleReduce(Operator):
    name = "warp_shuffle_reduce"
    category = "specialized_instruction"
    intent = (
        "Reduce within a warp with register shuffles (__shfl_xor_sync/__shfl_down_sync, offsets 16..1) "
        "instead of a shared-memory tree: no shared-memory traffic and no barriers."
    )
    mechanical_apply = True

    def find(self, src: CudaSource) -> list[Site]:
        sites = []
        for fn, r in reductions(src):
            fname = N.func_name(fn)
            sites.append(
                Site(
                    self.name,
                    src.anchor(r.first),
                    r.first.start_byte,
                    r.last.end_byte,
                    f"{r.kind} shuffle reduction of {r.var or ', '.join(r.shuffled) or '?'} ({r.form}) in {fname}",
                    tuple(
                        sorted(
                            {
                                "kind": r.kind,
                                "var": r.var,
                                "form": r.form,
                                "combiner": r.combiner or "unrecognised",
                                "mask": T.squash(r.mask),
                                "values": ",".join(r.shuffled),
                                "function": fname,
                            }.items()
                        )
                    ),
                )
            )
        return sites

    def _red(self, src: CudaSource, site: Site) -> tuple[ts.Node, _Red]:
        node = src.node_at(site.anchor)
        for fn, r in reductions(src):
            if r.first == node:
                return fn, r
        raise Refused(f"{self.name}: no shuffle reduction at {site.anchor}")

    def _facts(self, src: CudaSource, fn: ts.Node, r: _Red) -> list[Precondition]:
        ok_text = (
            f"a merge of ({', '.join(r.shuffled)}) per step; the tree applies it in the same order for lane 0"
            if r.shuffled
            else f"combiner {r.combiner.format(a='a', b='b')} is associative and commutative"
        )
        facts = [Precondition("recognised_combiner", not r.why, r.why or ok_text, "Data types")]
        m = T.eval_int(r.mask, T.file_constants(src)) if r.mask else None
        facts.append(
            Precondition(
                "full_warp_mask",
                m == _FULL,
                "mask is 0xffffffff: all 32 lanes take part"
                if m == _FULL
                else f"mask '{r.mask}' is not the full warp (or not a compile-time constant)",
                "Hardware",
            )
        )
        facts.append(
            Precondition(
                "whole_warp_reduction",
                r.start == 16,
                "offsets 16, 8, 4, 2, 1: one value per warp"
                if r.start == 16
                else f"starts at offset {r.start}: a segmented (sub-warp) reduction",
                "Layout",
            )
        )
        w = T.eval_int(r.width, T.file_constants(src)) if r.width else 32
        facts.append(
            Precondition(
                "full_width",
                w == 32,
                "shuffle width 32" if w == 32 else f"shuffle width {r.width}",
                "Hardware",
            )
        )
        places = [(r.first, "here")]
        fname = N.func_name(fn)
        if N.func_kind(fn) != "kernel":
            places += [
                (c, f"call at line {c.start_point.row + 1}")
                for c in T.calls_named(src.tree.root_node, re.escape(fname))
            ]
        for node, where in places:
            kind, cond = T.divergence(src, node)
            facts.append(
                Precondition(
                    "warp_converged",
                    kind != "lane",
                    f"{where}: reached by whole warps"
                    + (f" (branch on '{cond}' is warp-uniform)" if cond else "")
                    if kind != "lane"
                    else f"{where}: inside a lane-divergent branch '{cond}'",
                    "Hardware",
                )
            )
        if not r.shuffled and self._value_type(src, fn, r) is None and not r.why:
            facts.append(Precondition("value_type_known", False, f"type of {r.var} not found", "Data types"))
        return facts

    def _value_type(self, src: CudaSource, fn: ts.Node, r: _Red) -> str | None:
        return value_type(src, fn, r.var)

    def removal_preconditions(self, src: CudaSource, site: Site) -> list[Precondition]:
        fn, r = self._red(src, site)
        return self._facts(src, fn, r)

    def preconditions(self, src: CudaSource, site: Site) -> list[Precondition]:
        if site.details.get("forward") == "1":
            return [
                Precondition("per_warp_tree", True, "a per-warp shared-memory tree over 32 lanes", "Layout"),
                Precondition(
                    "full_warp_mask", True, "the tree runs with __syncwarp() over the whole warp", "Hardware"
                ),
            ]
        fn, r = self._red(src, site)
        return self._facts(src, fn, r)

    def _remove(self, src: CudaSource, site: Site) -> CudaSource:
        fn, r = self._red(src, site)
        if r.shuffled:
            return self._remove_merge(src, fn, r)
        ty = self._value_type(src, fn, r) or "float"
        ind = edit.indent_of(src, r.first)
        buf, lane, warp = f"{r.var}_tree", f"{r.var}_lane", f"{r.var}_warp"
        comb = r.combiner.format(a=f"{buf}[{warp}][{lane}]", b=f"{buf}[{warp}][{lane} + s]")
        step = f"{lane} < s"
        if r.guard:  # the same warp-uniform condition, read at the tree's offset
            step += f" && ({T.subst_idents(r.guard, {r.offset_var: 's'})})"
        tid = linear_tid(src)
        lines = [
            "{  // shared-memory tree over this warp's 32 lanes",
            f"    __shared__ {ty} {buf}[32][32];",
            f"    const int {lane} = {tid} & 31, {warp} = {tid} >> 5;",
            f"    {buf}[{warp}][{lane}] = {r.var};",
            "    __syncwarp();",
            "    for (int s = 16; s > 0; s >>= 1) {",
            f"        if ({step}) {buf}[{warp}][{lane}] = {comb};",
            "        __syncwarp();",
            "    }",
            f"    {r.var} = {buf}[{warp}][0];",
            "    __syncwarp();",
            "}",
        ]
        text = ("\n" + ind).join(lines)
        start = r.first.start_byte
        pragma = src.pragma_of(r.first) if r.form == "loop" else None
        if pragma is not None:
            start = src.line_start(pragma.line)
            text = ind + text
        return edit.apply_edits(src, [edit.Edit(start, r.last.end_byte, text)])

    def _remove_merge(self, src: CudaSource, fn: ts.Node, r: _Red) -> CudaSource:
        """Several values merged per step: each goes through its own per-warp buffer; lanes below the
        offset merge their partner's values in place; lane 0's values are broadcast at the end."""
        ind = edit.indent_of(src, r.first)
        lane, warp = "tree_lane", "tree_warp"
        bufs = {x: f"tree_{re.sub(r'[^0-9A-Za-z]', '_', x)}" for x in r.shuffled}
        tid = linear_tid(src)
        body = r.first.child_by_field_name("body")
        off = r.offset_var

        def rewrite(n: ts.Node) -> str | None:
            if n.type == "call_expression" and re.fullmatch(_SHFL, T.call_name(n)):
                x = T.squash(src.text_of(T.call_args(n)[1]))
                return f"{bufs[x]}[{warp}][{lane} + {off}]"
            return None

        inner = _render(src, body, rewrite)
        header = src.text_bytes[r.first.start_byte : body.start_byte].decode().rstrip()
        decls = []
        for x, b in bufs.items():
            ty = value_type(src, fn, x) if re.fullmatch(r"\w+", x) else None
            decls.append(f"    __shared__ {ty or f'decltype({x})'} {b}[32][32];")
        store = [f"{b}[{warp}][{lane}] = {x};" for x, b in bufs.items()]
        load = [f"{x} = {b}[{warp}][0];" for x, b in bufs.items()]
        lines = [
            "{  // shared-memory tree over this warp's 32 lanes, one buffer per merged value",
            *decls,
            f"    const int {lane} = {tid} & 31, {warp} = {tid} >> 5;",
            f"    {header} {{",
            *[f"        {x}" for x in store],
            "        __syncwarp();",
            f"        if ({lane} < {off}) " + inner.replace("\n", "\n        "),
            "        __syncwarp();",
            "    }",
            *[f"    {x}" for x in store],
            "    __syncwarp();",
            *[f"    {x}" for x in load],
            "    __syncwarp();",
            "}",
        ]
        text = ("\n" + ind).join(lines)
        start = r.first.start_byte
        pragma = src.pragma_of(r.first)
        if pragma is not None:
            start = src.line_start(pragma.line)
            text = ind + text
        return edit.apply_edits(src, [edit.Edit(start, r.last.end_byte, text)])

    # ---- forward: per-warp shared-memory tree -> shuffles ---------------------------------------
    def find_forward(self, src: CudaSource) -> list[Site]:
        sites = []
        for f in src.functions:
            if f.kind not in ("kernel", "device"):
                continue
            for blk, var, comb, _ in _warp_trees(src, src.node_for(f)):
                sites.append(
                    self.site(
                        src,
                        blk,
                        f"per-warp shared-memory tree of {var} in {f.name}",
                        var=var,
                        combiner=comb,
                        forward="1",
                    )
                )
        return sites

    def _apply(self, src: CudaSource, site: Site) -> CudaSource:
        node = src.node_at(site.anchor)
        for f in src.functions:
            if f.kind not in ("kernel", "device"):
                continue
            for blk, var, comb, guard in _warp_trees(src, src.node_for(f)):
                if blk == node:
                    ind = edit.indent_of(src, blk)
                    shfl = f"__shfl_xor_sync(0xffffffffu, {var}, off)"
                    step = (
                        f"{var} += {shfl};"
                        if comb == "{a} + {b}"
                        else f"{var} = {comb.format(a=var, b=shfl)};"
                    )
                    if guard:  # the tree skipped the levels this warp-uniform condition excludes
                        step = f"if ({T.subst_idents(guard, {'s': 'off'})}) {step}"
                    text = f"#pragma unroll\n{ind}for (int off = 16; off > 0; off >>= 1) {step}"
                    return edit.apply_edits(src, [edit.replace(blk, text)])
        raise Refused(f"{self.name}: no per-warp tree at {site.anchor}")


def _render(src: CudaSource, node: ts.Node, rewrite) -> str:
    """Text of `node` with the nodes `rewrite` answers for replaced (top-down, no nesting)."""
    r = rewrite(node)
    if r is not None:
        return r
    if not node.children:
        return src.text_of(node)
    parts, pos = [], node.start_byte
    for c in node.children:
        parts.append(src.text_bytes[pos : c.start_byte].decode())
        parts.append(_render(src, c, rewrite))
        pos = c.end_byte
    parts.append(src.text_bytes[pos : node.end_byte].decode())
    return "".join(parts)


_TREE_STEP = re.compile(r"^if\((\w+)<s(?:&&\((.+?)\))?\)(\w+)\[(\w+)\]\[\1\]=(.+);$")


def _warp_trees(src: CudaSource, fn: ts.Node) -> list[tuple[ts.Node, str, str, str]]:
    """Blocks holding a per-warp tree: `__shared__ T buf[32][32]`, a halving loop guarded by the lane
    (and maybe a warp-uniform condition on the offset `s`, returned as the last item) and separated
    by __syncwarp(), and the broadcast `v = buf[warp][0]`."""
    out = []
    for blk in T.walk(fn):
        if blk.type != "compound_statement":
            continue
        stmts = [s for s in blk.named_children if s.type != "comment"]
        if len(stmts) < 6 or not (stmts[0].type == "declaration" and "__shared__" in src.text_of(stmts[0])):
            continue
        buf = T.decl_name(stmts[0])
        if not buf or not T.squash(src.text_of(stmts[0])).endswith(f"{buf}[32][32];"):
            continue
        loop = next((s for s in stmts if s.type == "for_statement"), None)
        if loop is None or T.squash(src.text_of(loop.child_by_field_name("initializer"))) not in (
            "ints=16;",
            "ints=16",
        ):
            continue
        body = [c for c in loop.child_by_field_name("body").named_children if c.type != "comment"]
        if len(body) != 2 or T.squash(src.text_of(body[1])) != "__syncwarp();":
            continue
        m = _TREE_STEP.match(T.squash(src.text_of(body[0])))
        if m is None or m.group(3) != buf:
            continue
        lane, guard, warp, rhs = m.group(1), m.group(2) or "", m.group(4), m.group(5)
        a, b = f"{buf}[{warp}][{lane}]", f"{buf}[{warp}][{lane}+s]"
        comb = rhs.replace(b, "{b}").replace(a, "{a}")
        if "{a}" not in comb or "{b}" not in comb or buf in comb:
            continue
        comb = re.sub(r"\{a\}([+*&|^])\{b\}", r"{a} \1 {b}", comb).replace(",", ", ")
        readback = next(
            (
                s
                for s in stmts[stmts.index(loop) + 1 :]
                if s.type == "expression_statement"
                and T.squash(src.text_of(s)).endswith(f"={buf}[{warp}][0];")
            ),
            None,
        )
        if readback is None:
            continue
        var = T.squash(src.text_of(readback)).split("=")[0]
        if not any(T.squash(src.text_of(s)) == f"{buf}[{warp}][{lane}]={var};" for s in stmts):
            continue
        out.append((blk, var, comb, guard))
    return out
