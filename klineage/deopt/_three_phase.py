"""Read a three-phase attention on structure: a producer kernel writes a (rows x keys) scratch of
dot products, a row kernel normalizes each scratch row with a softmax in place, a consumer kernel
reduces over the keys with the scratch row as weights. flash_fusion fuses them into one kernel.

What is read (names and spelling are free):
- producer: one thread per scratch element (`idx` = the global thread index), statements that
  derive coordinates from `idx` (one of them the key, `idx % L`), a loop `acc += a * b` over a
  third coordinate, then the one store `P[idx] = value`, where `value` reads `acc`;
- row kernel: one thread per row, `P + row * L` (or `P[row * L + j]`) read in three loops over
  `j < L`: the max, the sum of exp(x - max), the write of exp(x - max) / sum;
- consumer: one thread per output, `row = idx / X`, a loop over `j < L` with `acc += w * t` where
  `w` is the scratch element (row, j), then statements that write `acc` out.
The three are launched one after the other in one launcher on the same scratch argument, with
the same row length L (compared on the launcher's side).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import tree_sitter as ts

from klineage.deopt import _threads as T
from klineage.deopt.base import Refused
from klineage.source.constructs import Function, LaunchSite
from klineage.source.model import CudaSource
from klineage.source.syntax import named, unparen_text

_EXP = r"(?:__expf|expf|exp|__exp)"
_MAX = r"(?:fmaxf|fmax|max)"
_INT = r"(?:int|unsigned|unsignedint|longlong|size_t)"


@dataclass(frozen=True)
class Kernel:
    """One kernel of the three: its function, launch, body statements and thread index."""

    fn: Function
    launch: LaunchSite
    node: ts.Node
    scratch: str  # the kernel's parameter bound to the scratch argument
    tid: str
    tid_type: str
    stmts: tuple[ts.Node, ...]  # top-level statements other than the thread index declaration


@dataclass(frozen=True)
class Producer:
    k: Kernel
    prelude: tuple[str, ...]  # statements before the dot loop (no accumulator declaration)
    acc: str
    acc_decl: str
    loop: str  # the dot loop as written
    var: str
    var_type: str
    extent: str
    query: str  # the factor that does not move with the key
    key: str  # the factor that does
    key_read: str  # the element read inside `key`
    query_read: str
    value: str  # the stored value (reads acc)


@dataclass(frozen=True)
class RowSoftmax:
    k: Kernel
    guard: str  # the condition under which a row thread returns
    exp: str


@dataclass(frozen=True)
class Consumer:
    k: Kernel
    prelude: tuple[str, ...]  # statements before the loop, without the scratch row pointer
    acc: str
    var: str
    var_type: str
    columns: str  # X in row = idx / X
    term: str  # the factor beside the weight
    term_read: str
    post: tuple[str, ...]  # statements after the loop


@dataclass(frozen=True)
class ThreePhase:
    launcher: ts.Node
    producer: Producer
    softmax: RowSoftmax
    consumer: Consumer
    length: str  # L, in the consumer's parameter names
    rows_host: str  # the number of scratch rows on the launcher's side
    scratch_arg: str


def _stmts(node: ts.Node) -> list[ts.Node]:
    """The statements of `node`'s body (a loop's, a function's)."""
    return named(node.child_by_field_name("body"))


def _kernel(src: CudaSource, ls: LaunchSite, scratch_arg: str) -> Kernel:
    fn = src.kernel(ls.name)
    if fn is None:
        raise Refused(f"no kernel '{ls.name}' in the file")
    pm = T.param_map(fn, ls)
    names = [p for p, a in pm.items() if T.squash(a) == T.squash(scratch_arg)]
    if len(names) != 1:
        raise Refused(f"{fn.name}: the scratch is not passed once")
    node = src.node_for(fn)
    stmts = _stmts(node)
    for i, s in enumerate(stmts):
        if s.type != "declaration":
            continue
        d = s.children_by_field_name("declarator")
        v = d[0].child_by_field_name("value") if len(d) == 1 else None
        if v is not None and T.global_tid(src.text_of(v)) is not None:
            ty = src.text_of(s.child_by_field_name("type")).replace("const", "").strip()
            rest = tuple(stmts[:i] + stmts[i + 1 :])
            return Kernel(fn, ls, node, names[0], T.decl_name(s) or "", ty, rest)
    raise Refused(f"{fn.name}: no thread-per-element index (blockIdx.x * blockDim.x + threadIdx.x)")


def _counted(src: CudaSource, s: ts.Node) -> tuple[str, str, str] | None:
    """(var, type, extent) of `for (T v = 0; v < E; ++v)`, else None."""
    init, cond, upd = (s.child_by_field_name(f) for f in ("initializer", "condition", "update"))
    d = _decl(src, init) if init is not None else None
    if d is None or cond is None or upd is None or T.strip_casts(d[1]) not in ("0", "0LL", "0u"):
        return None
    var = d[0]
    c = re.fullmatch(rf"{var}<(.+)", T.squash(src.text_of(cond)))
    if c is None or T.squash(src.text_of(upd)) not in (f"++{var}", f"{var}++", f"{var}+=1"):
        return None
    ty = src.text_of(init.child_by_field_name("type")).replace("const", "").strip()
    return var, ty, c.group(1)


def _accumulating_loop(src: CudaSource, stmts: tuple[ts.Node, ...]) -> tuple[int, str, str, str, str, str]:
    """(position, loop var, its type, extent, accumulator, addend) of the one `acc += a * b` loop."""
    found = []
    for i, s in enumerate(stmts):
        if s.type != "for_statement" or (head := _counted(src, s)) is None:
            continue
        body = s.child_by_field_name("body")
        inner = (
            [c for c in body.named_children if c.type != "comment"]
            if body.type == "compound_statement"
            else [body]
        )
        a = (
            re.fullmatch(r"\s*(\w+)\s*\+=\s*(.+?);\s*", src.text_of(inner[0]), re.S)
            if len(inner) == 1
            else None
        )
        if a is not None:
            found.append((i, *head, a.group(1), a.group(2)))
    if len(found) != 1:
        raise Refused(f"{len(found)} accumulating loops (one `acc += a * b` over a counted loop expected)")
    return found[0]


def _factors(text: str) -> tuple[str, str]:
    node = CudaSource.from_text(f"void f() {{ x = {text}; }}").tree.root_node
    expr = next(n for n in T.walk(node) if n.type == "assignment_expression").child_by_field_name("right")
    while expr.type == "parenthesized_expression":
        expr = expr.named_children[0]
    if expr.type != "binary_expression" or expr.child_by_field_name("operator").type != "*":
        raise Refused(f"the loop adds `{text}`, not a product of two factors")
    return expr.child_by_field_name("left").text.decode(), expr.child_by_field_name("right").text.decode()


def _element_read(text: str) -> str:
    """The one element read of a factor: `conv(X[e])`, `X[e]` or `*(p)`; Refused otherwise."""
    t = text.strip()
    m = re.fullmatch(r"(?:\w+\s*)?\((.*)\)", t, re.S)
    inner = m.group(1).strip() if m and not re.fullmatch(r"\w+\s*\[.*\]", t, re.S) else t
    if re.fullmatch(r"[\w.>-]+\s*\[.*\]", inner, re.S) or inner.startswith("*"):
        return inner
    raise Refused(f"the factor `{text}` is not one element read (converted)")


def _decl(src: CudaSource, s: ts.Node) -> tuple[str, str] | None:
    """(name, initializer text) of a one-variable declaration."""
    if s.type != "declaration":
        return None
    d = s.children_by_field_name("declarator")
    v = d[0].child_by_field_name("value") if len(d) == 1 else None
    name = T.decl_name(s)
    return (name, src.text_of(v)) if v is not None and name else None


def _depends(src: CudaSource, stmts: list[ts.Node], seed: str) -> set[str]:
    """Names whose initializers read `seed`, transitively (in statement order)."""
    out = {seed}
    for s in stmts:
        d = _decl(src, s)
        if d is not None and set(re.findall(r"\b\w+\b", d[1])) & out:
            out.add(d[0])
    return out


def producer(src: CudaSource, k: Kernel, length_host: str) -> Producer:
    """The producer; its key coordinate is `idx % L` with L the rows' length on the launcher side."""
    i, var, vty, extent, acc, addend = _accumulating_loop(src, k.stmts)
    store = k.stmts[-1]
    m = re.fullmatch(rf"\s*{k.scratch}\s*\[\s*{k.tid}\s*\]\s*=\s*(.+?);\s*", src.text_of(store), re.S)
    if m is None or store is k.stmts[i]:
        raise Refused(f"{k.fn.name}: the last statement does not store the scratch at the thread index")
    if any(k.scratch in re.findall(r"\b\w+\b", src.text_of(s)) for s in k.stmts[:-1]):
        raise Refused(f"{k.fn.name}: the scratch is read before it is written")
    if k.stmts[i + 1 : -1]:
        raise Refused(f"{k.fn.name}: statements between the dot loop and the store")
    before = list(k.stmts[:i])
    acc_decls = [s for s in before if (d := _decl(src, s)) is not None and d[0] == acc]
    if len(acc_decls) != 1 or T.strip_casts(_decl(src, acc_decls[0])[1]) not in ("0.0f", "0.f", "0", "0.0"):  # type: ignore[index]
        raise Refused(f"{k.fn.name}: the accumulator does not start at zero")
    keys = [
        d[0]
        for s in before
        if (d := _decl(src, s)) is not None
        and (km := re.fullmatch(rf"\(?{k.tid}%\(?(\w+)\)?\)?", T.strip_casts(d[1]))) is not None
        and T.squash(T.kernel_expr_in_launcher(src, k.fn, k.launch, km.group(1), k.node) or "")
        == T.squash(length_host)
    ]
    if len(keys) != 1:
        raise Refused(f"{k.fn.name}: no key coordinate `{k.tid} % L` (L the scratch row length)")
    moving = _depends(src, before, keys[0])
    a, b = _factors(addend)
    in_a, in_b = (bool(set(re.findall(r"\b\w+\b", f)) & moving) for f in (a, b))
    if in_a == in_b:
        raise Refused(f"{k.fn.name}: not one factor moving with the key and one not")
    query, key = (b, a) if in_a else (a, b)
    prelude = tuple(src.text_of(s) for s in before if s is not acc_decls[0])
    return Producer(
        k, prelude, acc, src.text_of(acc_decls[0]), src.text_of(k.stmts[i]), var, vty, extent,
        query, key, _element_read(key), _element_read(query), m.group(1),
    )  # fmt: skip


def softmax(src: CudaSource, k: Kernel) -> tuple[RowSoftmax, str]:
    """The row kernel and its row length L (its own parameter names)."""
    guards = [s for s in k.stmts if s.type == "if_statement"]
    g = re.fullmatch(r"if\((.+)\)return;", T.squash(src.text_of(guards[0]))) if len(guards) == 1 else None
    if g is None:
        raise Refused(f"{k.fn.name}: not one row guard `if (...) return;`")
    body = T.squash("".join(src.text_of(s) for s in k.stmts))
    ptr = re.search(
        rf"\*(\w+)={k.scratch}\+(?:\(longlong\))?\(?{k.tid}\)?\*\(?(\w+)\)?;", T.strip_casts(body)
    )
    if ptr is None:
        raise Refused(f"{k.fn.name}: no row pointer `{k.scratch} + {k.tid} * L`")
    p, length = ptr.groups()
    loops = [T.squash(src.text_of(s)) for s in k.stmts if s.type == "for_statement"]
    pats = (
        rf"for\({_INT}(\w+)=0;\1<{length};\+\+\1\)(\w+)={_MAX}\(\2,{p}\[\1\]\);",
        rf"for\({_INT}(\w+)=0;\1<{length};\+\+\1\)(\w+)\+=({_EXP})\({p}\[\1\]-(\w+)\);",
        rf"for\({_INT}(\w+)=0;\1<{length};\+\+\1\){p}\[\1\]={_EXP}\({p}\[\1\]-\w+\)/\w+;",
    )
    hits = [next((re.fullmatch(rx, lp) for lp in loops if re.fullmatch(rx, lp)), None) for rx in pats]
    if len(loops) != 3 or any(h is None for h in hits):
        raise Refused(f"{k.fn.name}: not a row softmax (max, sum of exp, normalized write over `{p}`)")
    cond = src.text_of(guards[0].child_by_field_name("condition"))
    return RowSoftmax(k, cond, hits[1].group(3)), length  # type: ignore[union-attr]


def consumer(src: CudaSource, k: Kernel) -> tuple[Consumer, str]:
    """The weighted sum and its row length L (its own parameter names)."""
    i, var, vty, _, acc, addend = _accumulating_loop(src, k.stmts)
    loop_hdr = T.squash(src.text_of(k.stmts[i]).split(")", 1)[0])
    length = re.search(rf"{var}<(.+?);", loop_hdr).group(1)  # type: ignore[union-attr]
    before = list(k.stmts[:i])
    rows = {d[0]: T.strip_casts(d[1]) for s in before if (d := _decl(src, s)) is not None}
    rowvars = {
        n: m.group(1) for n, v in rows.items() if (m := re.fullmatch(rf"\(?{k.tid}/\(?(\w+)\)?\)?", v))
    }
    if not rowvars:
        raise Refused(f"{k.fn.name}: no output row `{k.tid} / X`")
    ptrs = [
        s for s in before
        if (d := _decl(src, s)) is not None
        and any(re.fullmatch(rf"\(?{k.scratch}\+\(?{r}\)?\*\(?{length}\)?\)?", T.strip_casts(d[1])) for r in rowvars)
    ]  # fmt: skip
    row = next(
        (r for r in rowvars if ptrs and re.search(rf"\b{r}\b", src.text_of(ptrs[0]))), next(iter(rowvars))
    )
    cols = rowvars[row]
    w, t = _factors(addend)
    if ptrs:
        p = T.decl_name(ptrs[0])
        if T.squash(w) != f"{p}[{var}]":
            w, t = t, w
        weight_ok = T.squash(w) == f"{p}[{var}]"
    else:
        if T.strip_casts(t).startswith(f"{k.scratch}["):
            w, t = t, w
        weight_ok = T.strip_casts(w) in (
            f"{k.scratch}[{row}*{length}+{var}]",
            f"{k.scratch}[({row})*{length}+{var}]",
        )
    if not weight_ok:
        raise Refused(f"{k.fn.name}: the weight is not the scratch element (row, {var})")
    prelude = tuple(src.text_of(s) for s in before if s not in ptrs)
    if any(k.scratch in re.findall(r"\b\w+\b", x) for x in (*prelude, t)):
        raise Refused(f"{k.fn.name}: the scratch is read other than as the weight")
    acc_decl = [x for x in prelude if re.fullmatch(rf"\s*float\s+{acc}\s*=\s*0(?:\.0?f?)?\s*;\s*", x)]
    if len(acc_decl) != 1:
        raise Refused(f"{k.fn.name}: the accumulator is not a float starting at zero")
    post = tuple(src.text_of(s) for s in k.stmts[i + 1 :])
    prelude = tuple(x for x in prelude if x is not acc_decl[0])
    return Consumer(k, prelude, acc, var, vty, cols, t, _element_read(t), post), length


def read(src: CudaSource, first: LaunchSite) -> ThreePhase:
    """The three-phase form whose producer is launched at `first`; Refused (naming why) if not."""
    launcher = T.enclosing_launcher(src, first)
    if launcher is None:
        raise Refused("the launch is not in a function")
    seq = [ls for ls in src.launch_sites if launcher.start_byte <= ls.start < launcher.end_byte]
    at = seq.index(first)
    if at + 3 > len(seq):
        raise Refused("fewer than three launches from here")
    a, b, c = seq[at : at + 3]
    shared = [x for x in a.args if x in b.args and x in c.args and re.fullmatch(r"\w+", x.strip())]
    why = "no scratch argument shared by three launches (producer, row softmax, weighted sum)"
    for arg in shared:
        try:
            return _read(src, launcher, arg, a, b, c)
        except Refused as e:
            why = str(e)
    raise Refused(why)


def _read(
    src: CudaSource, launcher: ts.Node, arg: str, a: LaunchSite, b: LaunchSite, c: LaunchSite
) -> ThreePhase:
    kp, ks, kc = (_kernel(src, ls, arg) for ls in (a, b, c))
    sm, len_s = softmax(src, ks)
    cons, len_c = consumer(src, kc)
    host = [
        T.kernel_expr_in_launcher(src, k.fn, k.launch, ln, k.node) for k, ln in ((ks, len_s), (kc, len_c))
    ]
    if host[0] is None or T.squash(host[0]) != T.squash(host[1] or ""):
        raise Refused("the row kernel and the weighted sum do not read rows of one length")
    prod = producer(src, kp, host[0])
    rows = row_bound(sm)
    rows_host = T.kernel_expr_in_launcher(src, ks.fn, ks.launch, rows, ks.node) if rows else None
    if rows_host is None:
        raise Refused(f"{ks.fn.name}: the row guard is not `row >= rows` over parameters")
    return ThreePhase(launcher, prod, sm, cons, len_c, rows_host, arg)


def row_bound(sm: RowSoftmax) -> str | None:
    """`rows` in the row kernel's guard `row >= rows` (casts dropped), in its parameter names."""
    m = re.fullmatch(rf"\(?{sm.k.tid}\)?>=(.+)", unparen_text(T.strip_casts(unparen_text(sm.guard))))
    return m.group(1) if m else None
