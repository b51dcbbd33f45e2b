"""Online softmax across key tiles: each query row keeps its running max `m` and sum `l` in state
arrays, and every key tile folds its scores in: the tile's max and exp-sum, the new max
`mn = max(m, tile max)`, the new sum `l * exp(m - mn) + tile sum * exp(tile max - mn)`, and the
output row rescaled, `O = (l * exp(m - mn) * O + exp(tile max - mn) * P V) / new sum` (the flash
kernels' update, flash-attention-minimal's written over global m, l and O). The keys are read
once per query row instead of three times.

Backward: the loop nest over key tiles runs three times, one pass per phase of the plain softmax:
the row max over every tile into m, the exp-sum against that max into l, then the output as the
sum over tiles of P V / l with P = exp(score - max). The score loop and the exp loop are the
kernel's own, kept verbatim in each pass; only the state's reads and writes change, so m and l end
with the values the expert leaves (the row max and the sum against it). Pass state restarts at the
first key tile, so no pass depends on what the host left in m, l or O.

Read on structure in a two-loop nest (key tiles, then query tiles, each a counting loop): the
query-tile body is the state loads, the tile max (`RM = ...` then a loop updating it), the tile sum
(`RL = ...` then a loop accumulating it and reading RM), the new max and sum, the output loop
(an accumulator summed in an inner loop, then the output element updated from itself) and the
state stores. The update formulas are checked by evaluating them at sample values. No mechanical
forward step (roundtrip none, as online_softmax's): the offline materializer cannot apply the
skill it records, an LLM provider may; flash_fusion is the mechanical forward fusion.
"""

from __future__ import annotations

import math
import random
import re
from dataclasses import dataclass

import tree_sitter as ts

from klineage.deopt._threads import counting_loop
from klineage.deopt.base import Operator, Precondition, Refused, Site
from klineage.source import edit
from klineage.source.model import CudaSource
from klineage.source.syntax import (
    assigned_in,
    decl_name,
    eval_real,
    init_text,
    named,
    squash,
    uses_ident,
    walk,
    written_names,
)

_MAX = re.compile(r"(?:fmaxf|fmax|max)\((\w+),(\w+)\)")


@dataclass(frozen=True)
class _Nest:
    """The recognised statements of one online-softmax tile nest."""

    keys: ts.Node  # the key-tile loop (outer)
    first: str  # its first index, `keys_var == first` at the first tile
    keys_var: str
    rows: ts.Node  # the query-tile loop (inner)
    m_ref: str  # the running max's element, as stored (`m[IDX]`)
    l_ref: str  # the running sum's element
    o_ref: str  # the output element the output loop updates
    m_prev: str
    l_prev: str
    rm: ts.Node  # `T RM = INIT;`
    score: ts.Node  # the loop that updates RM
    rl: ts.Node  # `T RL = INIT;`
    expo: ts.Node  # the loop that accumulates RL
    mn: tuple[str, str]  # (name, value text)
    ln: tuple[str, str]
    out: ts.Node  # the output loop
    acc: str  # its accumulator
    o_update: ts.Node  # the assignment to o_ref
    state: tuple[str, str]  # the state arrays' names (m, l)
    locals_: tuple[ts.Node, ...]  # the query-tile body's index locals, kept in every pass

    @property
    def rm_name(self) -> str:
        return decl_name(self.rm) or ""

    @property
    def rl_name(self) -> str:
        return decl_name(self.rl) or ""


def _stmts(body: ts.Node | None) -> list[ts.Node]:
    """A block's statements; none for a body that is not a block."""
    return named(body) if body is not None and body.type == "compound_statement" else []


def _value(src: CudaSource, decl: ts.Node) -> ts.Node | None:
    ds = decl.children_by_field_name("declarator")
    if decl.type != "declaration" or len(ds) != 1 or ds[0].type != "init_declarator":
        return None
    return ds[0].child_by_field_name("value")


def _assign(src: CudaSource, stmt: ts.Node) -> tuple[str, str] | None:
    """(left, right) of a plain `a = b;` statement, as written."""
    if stmt.type != "expression_statement" or not stmt.named_children:
        return None
    a = stmt.named_children[0]
    if a.type != "assignment_expression" or a.child_by_field_name("operator").type != "=":
        return None
    return src.text_of(a.child_by_field_name("left")), src.text_of(a.child_by_field_name("right"))


def _array(text: str) -> str | None:
    m = re.fullmatch(r"(\w+)\[.+\]", squash(text))
    return m.group(1) if m else None


def _barrier_or_decl(src: CudaSource, s: ts.Node) -> bool:
    return s.type == "declaration" or squash(src.text_of(s)) == "__syncthreads();"


def read(src: CudaSource, keys: ts.Node) -> _Nest:
    """The online-softmax nest rooted at the key-tile loop `keys`; Refused with what is missing."""
    ck = counting_loop(src, keys)
    if ck is None:
        raise Refused("the key-tile loop is not a counting loop")
    outer = _stmts(keys.child_by_field_name("body"))
    inner = [s for s in outer if s.type == "for_statement"]
    if len(inner) != 1 or not all(_barrier_or_decl(src, s) for s in outer if s is not inner[0]):
        raise Refused("the key-tile loop's body is not one query-tile loop among barriers and declarations")
    rows = inner[0]
    if counting_loop(src, rows) is None:
        raise Refused("the query-tile loop is not a counting loop")
    body = _stmts(rows.child_by_field_name("body"))
    decls = {decl_name(s): s for s in body if s.type == "declaration"}
    stores = {_array(a[0]): a for s in body if (a := _assign(src, s)) is not None and _array(a[0])}
    loads = {}
    for name, d in decls.items():
        v = _value(src, d)
        arr = _array(src.text_of(v)) if v is not None else None
        if arr is not None and arr in stores and squash(src.text_of(v)) == squash(stores[arr][0]):
            loads[arr] = (name, stores[arr])
    loops = [s for s in body if s.type == "for_statement"]
    mn = next(
        (
            (n, src.text_of(v))
            for n, d in decls.items()
            if (v := _value(src, d)) is not None and _MAX.fullmatch(squash(src.text_of(v)))
        ),
        None,
    )
    if mn is None:
        raise Refused("no new running max `mn = max(m, tile max)` in the query-tile body")
    a, b = _MAX.fullmatch(squash(mn[1])).groups()  # type: ignore[union-attr]
    m_arr = next(
        (arr for arr, (name, st) in loads.items() if name in (a, b) and squash(st[1]) == mn[0]), None
    )
    if m_arr is None:
        raise Refused(f"{mn[0]} is not stored back to the state it reads")
    m_prev = loads[m_arr][0]
    rm_name = b if a == m_prev else a
    ln_arr = next((arr for arr, (name, st) in loads.items() if arr != m_arr and squash(st[1]) in decls), None)
    if ln_arr is None:
        raise Refused("no running sum loaded and stored back beside the running max")
    l_prev, ln_name = loads[ln_arr][0], squash(loads[ln_arr][1][1])
    rm = decls.get(rm_name)
    score = next((x for x in loops if rm_name in assigned_in(x)), None)
    if rm is None or score is None:
        raise Refused(f"the tile max {rm_name} is not declared and updated in a loop")
    expo = next((x for x in loops if x is not score and uses_ident(x, rm_name)), None)
    rl_name = next((n for n in (expo and assigned_in(expo)) or () if n in decls and n != rm_name), None)
    if expo is None or rl_name is None:
        raise Refused(f"no loop sums exp(score - {rm_name}) into a declared tile sum")
    out = [x for x in loops if x not in (score, expo)]
    if len(out) != 1:
        raise Refused(f"{len(out)} loops besides the tile max and sum (one output loop expected)")
    acc, o_update = _output(src, out[0])
    ln_value = src.text_of(_value(src, decls[ln_name]))  # type: ignore[arg-type]
    order = [rm, score, decls[rl_name], expo, out[0]]
    if any(x.start_byte >= y.start_byte for x, y in zip(order, order[1:], strict=False)):
        raise Refused("the tile max, tile sum and output loop are not in that order")
    known = {rm, score, decls[rl_name], expo, out[0], decls[mn[0]], decls[ln_name], decls[m_prev]}
    known |= {decls[l_prev]} | {s for s in body if _assign(src, s) in (stores[m_arr], stores[ln_arr])}
    extra = [s for s in body if s not in known]
    if any(s.type != "declaration" or s.start_byte > score.start_byte for s in extra):
        raise Refused("the query-tile body holds statements besides the online update and its index locals")
    if any(uses_ident(s, nm) for s in extra for nm in (m_arr, ln_arr, _array(o_update_left(src, o_update)))):
        raise Refused("an index local of the query-tile body reads the running state or the output")
    return _Nest(
        keys=keys,
        first=src.text_of(ck[1]),
        keys_var=ck[0],
        rows=rows,
        m_ref=stores[m_arr][0],
        l_ref=stores[ln_arr][0],
        o_ref=o_update_left(src, o_update),
        m_prev=m_prev,
        l_prev=l_prev,
        rm=rm,
        score=score,
        rl=decls[rl_name],
        expo=expo,
        mn=mn,
        ln=(ln_name, ln_value),
        out=out[0],
        acc=acc,
        o_update=o_update,
        state=(m_arr, ln_arr),
        locals_=tuple(extra),
    )


def o_update_left(src: CudaSource, update: ts.Node) -> str:
    return src.text_of(update.child_by_field_name("left"))


def _output(src: CudaSource, loop: ts.Node) -> tuple[str, ts.Node]:
    """(accumulator, the output element's update) of `for (...) { T acc = 0; for (...) acc += ...;
    O[...] = f(O[...], acc, ...); }`."""
    body = _stmts(loop.child_by_field_name("body"))
    if len(body) != 3 or body[0].type != "declaration" or body[1].type != "for_statement":
        raise Refused("the output loop is not `acc = 0; for (...) acc += ...; out = ...;`")
    acc = decl_name(body[0]) or ""
    a = _assign(src, body[2])
    if acc not in assigned_in(body[1]) or a is None or _array(a[0]) is None:
        raise Refused("the output loop does not accumulate and then store one element")
    if squash(a[0]) not in squash(a[1]):
        raise Refused("the output element is not updated from its own value")
    return acc, body[2].named_children[0]


def _update_facts(n: _Nest) -> list[Precondition]:
    """The new sum and the output update are the online rescale, checked at sample values."""
    rng = random.Random(7)
    sum_ok = out_ok = True
    o_value = squash(n.o_update.child_by_field_name("right").text.decode().replace("\\\n", " "))
    o_value = o_value.replace(squash(n.o_ref), "kl_o")
    for _ in range(4):
        mp, rm = rng.uniform(-3, 3), rng.uniform(-3, 3)
        mn = max(mp, rm)
        lp, rl, o, pv = rng.uniform(0.5, 4), rng.uniform(0.5, 4), rng.uniform(-2, 2), rng.uniform(-2, 2)
        env = {n.m_prev: mp, n.rm_name: rm, n.mn[0]: mn, n.l_prev: lp, n.rl_name: rl, "kl_o": o, n.acc: pv}
        want_l = lp * math.exp(mp - mn) + rl * math.exp(rm - mn)
        got_l = eval_real(squash(n.ln[1]), env)
        sum_ok &= got_l is not None and abs(got_l - want_l) <= 1e-9 * max(1.0, abs(want_l))
        env[n.ln[0]] = want_l
        want_o = (lp * math.exp(mp - mn) * o + math.exp(rm - mn) * pv) / want_l
        got_o = eval_real(o_value, env)
        out_ok &= got_o is not None and abs(got_o - want_o) <= 1e-9 * max(1.0, abs(want_o))
    return [
        Precondition(
            "online_sum_rescale",
            sum_ok,
            f"{n.ln[0]} = {n.l_prev} * exp({n.m_prev} - {n.mn[0]}) + {n.rl_name} * exp({n.rm_name} - {n.mn[0]})",
            "Layout",
        ),
        Precondition(
            "online_output_rescale",
            out_ok,
            f"{n.o_ref} is rescaled to the new max and sum and adds exp({n.rm_name} - {n.mn[0]}) * {n.acc}",
            "Layout",
        ),
    ]


def _declared_here(ident: ts.Node) -> bool:
    """The name being declared (`float* mh = run_max + ...`), not a use of it."""
    d = ident.parent
    while d is not None and d.type in ("pointer_declarator", "array_declarator"):
        d = d.parent
    return (
        d is not None
        and d.type == "init_declarator"
        and ident.start_byte < (d.child_by_field_name("value") or d).start_byte
    )


def _global_writes(src: CudaSource, fn: ts.Node, n: _Nest) -> list[str]:
    """Names the score and exp loops write that are, or point into, a kernel pointer parameter
    (a write repeated by each pass: an accumulation would count three times)."""
    params = fn.child_by_field_name("declarator").child_by_field_name("parameters")
    pointers = {
        decl_name(p) or ""
        for p in (params.named_children if params is not None else [])
        if "*" in src.text_of(p) or "[" in src.text_of(p)
    }
    out = []
    for name in sorted(
        written_names(n.score, through_access=True) | written_names(n.expo, through_access=True)
    ):
        if name in pointers:
            out.append(name)
            continue
        init = init_text(src, fn, name)
        if init is not None and pointers & set(re.findall(r"\w+", init)):
            out.append(name)
    return out


def _state_facts(src: CudaSource, fn: ts.Node, n: _Nest) -> list[Precondition]:
    """The state and the output are touched only by the update, each row by one thread."""
    names = (*n.state, _array(n.o_ref) or "")
    stray = [
        nm
        for x in walk(fn.child_by_field_name("body"))
        if x.type == "identifier"
        and (nm := x.text.decode()) in names
        and not n.rows.start_byte <= x.start_byte < n.rows.end_byte
        and not _declared_here(x)
    ]
    in_phases = [nm for nm in names for x in (n.score, n.expo) if uses_ident(x, nm)]
    private = "threadIdx" in n.m_ref and "threadIdx" in n.l_ref and "threadIdx" in n.o_ref
    globals_written = _global_writes(src, fn, n)
    return [
        Precondition(
            "phases_write_no_global",
            not globals_written,
            "the score and exp loops, run once per pass after the edit, write only registers and "
            "shared memory" + (f" ({', '.join(globals_written)} written)" if globals_written else ""),
            "Storage",
        ),
        Precondition(
            "state_only_in_update",
            not stray and not in_phases,
            "the running max, the running sum and the output are read and written only by the update"
            + (f" ({', '.join(sorted(set(stray + in_phases)))} elsewhere)" if stray or in_phases else ""),
            "Storage",
        ),
        Precondition(
            "thread_private_rows",
            private,
            "each thread owns its query row's state and output (threadIdx in their indices)",
            "Layout",
        ),
    ]


class TiledOnlineSoftmax(Operator):
    name = "tiled_online_softmax"
    category = "fusion"
    intent = (
        "Carry each query row's softmax across key tiles: a running max and sum, the output "
        "rescaled per tile, so the keys are read once instead of once per softmax phase"
    )

    def find(self, src: CudaSource) -> list[Site]:
        out = []
        for k in src.kernels:
            fn = src.node_for(k)
            for loop in (x for x in walk(fn) if x.type == "for_statement"):
                try:
                    read(src, loop)
                except Refused:
                    continue
                out.append(
                    self.site(src, loop, f"online softmax across key tiles in {k.name}", kernel=k.name)
                )
        return out

    def _nest(self, src: CudaSource, site: Site) -> tuple[ts.Node, _Nest]:
        loop = next(
            (
                x
                for x in src.nodes_of_type("for_statement")
                if (x.start_byte, x.end_byte) == (site.start, site.end)
            ),
            None,
        )
        if loop is None:
            raise Refused(f"{self.name}: no key-tile loop at the site")
        fn = loop
        while fn.parent is not None and fn.type != "function_definition":
            fn = fn.parent
        return fn, read(src, loop)

    def removal_preconditions(self, src: CudaSource, site: Site) -> list[Precondition]:
        try:
            fn, n = self._nest(src, site)
        except Refused as e:
            return [Precondition("online_tile_nest", False, str(e), "Layout")]
        return [*_update_facts(n), *_state_facts(src, fn, n)]

    def _remove(self, src: CudaSource, site: Site) -> CudaSource:
        _, n = self._nest(src, site)
        passes = [_pass(src, n, body) for body in (_max_pass(src, n), _sum_pass(src, n), _out_pass(src, n))]
        indent = edit.indent_of(src, n.keys)
        return edit.apply_edits(src, [edit.replace(n.keys, f"\n{indent}".join(passes))])


def _pass(src: CudaSource, n: _Nest, body: list[str]) -> str:
    """The key-tile nest with the query-tile body replaced by `body`'s statements."""
    ind = edit.indent_of(src, n.rm)
    rows_body = n.rows.child_by_field_name("body")
    body = [*(src.text_of(x) for x in n.locals_), *body]
    new_body = "{\n" + "".join(f"{ind}{s}\n" for s in body) + edit.indent_of(src, n.rows) + "}"
    return _splice(n.keys, src.text_of(n.keys), rows_body, new_body)


def _first(n: _Nest, then: str, otherwise: str) -> str:
    return f"{n.keys_var} == {n.first} ? {then} : {otherwise}"


def _type(src: CudaSource, decl: ts.Node) -> str:
    return src.text_of(decl.child_by_field_name("type"))


def _restarted(src: CudaSource, n: _Nest, decl: ts.Node, ref: str) -> str:
    """`decl` with its own initializer at the first key tile and the state element `ref` after."""
    init = src.text_of(_value(src, decl))  # type: ignore[arg-type]
    return f"{_type(src, decl)} {decl_name(decl)} = {_first(n, f'({init})', ref)};"


def _splice(outer: ts.Node, text: str, inner: ts.Node, new: str) -> str:
    """`text` (the text of `outer`) with `inner`'s bytes replaced by `new`."""
    a, b = inner.start_byte - outer.start_byte, inner.end_byte - outer.start_byte
    return text[:a] + new + text[b:]


def _max_pass(src: CudaSource, n: _Nest) -> list[str]:
    """The row max over every key tile, into the state's max."""
    return [
        _restarted(src, n, n.rm, n.m_ref),
        src.text_of(n.score),
        f"{n.m_ref} = {n.rm_name};",
    ]


def _sum_pass(src: CudaSource, n: _Nest) -> list[str]:
    """The exp-sum against the row max (the score loop's max update never fires: the max is final)."""
    return [
        f"{_type(src, n.rm)} {n.rm_name} = {n.m_ref};",
        src.text_of(n.score),
        _restarted(src, n, n.rl, n.l_ref),
        src.text_of(n.expo),
        f"{n.l_ref} = {n.rl_name};",
    ]


def _out_pass(src: CudaSource, n: _Nest) -> list[str]:
    """The output as the sum over key tiles of P V / sum, P = exp(score - row max)."""
    term = f"{n.acc} / {n.ln[0]}"
    new = f"{n.o_ref} = {_first(n, term, f'{n.o_ref} + {term}')}"
    return [
        f"{_type(src, n.rm)} {n.rm_name} = {n.m_ref};",
        src.text_of(n.score),
        src.text_of(n.rl),
        src.text_of(n.expo),
        f"{_type(src, n.rl)} {n.ln[0]} = {n.l_ref};",
        _splice(n.out, src.text_of(n.out), n.o_update, new),
    ]
