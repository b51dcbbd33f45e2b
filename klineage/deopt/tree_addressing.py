"""Sequential addressing in a shared-memory reduction tree.

A block folds `B` shared values into one in log2(B) rounds. With *strided-index* addressing round
`s` (1, 2, 4, ...) lets thread t add `a[2*s*t + s]` into `a[2*s*t]`: the active threads are the
first B/(2s), but thread t's accesses stride by 2s elements, so the threads of a warp hit the same
banks (conflicts). With *sequential* addressing round `s` (B/2, B/4, ..., 1) lets the first s
threads add the element s further on: active threads contiguous, accesses consecutive. Both fold
the same B values for a power-of-two B; only the order of the additions differs. (The step
before, from the divergent modulo tree `if (t % (2*s) == 0)` to the strided index, is
tree_compaction's.)

Backward: `for (s = B/2; s > 0; s >>= 1) { if (t < s) a[t] += a[t + s]; __syncthreads(); }`
becomes `for (s = 1; s < B; s *= 2) { int i = 2 * s * t; if (i < B) a[i] += a[i + s]; __syncthreads(); }`.
Forward: the strided-index loop, or the modulo one before it, becomes the sequential one. The
combine may be `+=`, `a = a + b`, or a max/min call. The tree reader is public (`reduction_trees`,
`rewrite_tree`, `tree_facts`) for tree_compaction.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import ClassVar

import tree_sitter as ts

from klineage.deopt.base import Operator, Precondition, Refused, Site
from klineage.source import edit
from klineage.source import syntax as S
from klineage.source.model import CudaSource

_ID = r"[A-Za-z_]\w*"
_TYPE = r"(?P<ty>(?:unsigned\s+int|unsigned|int|size_t|uint32_t|uint)\s+)"
#: `for (T s = B / 2; s > 0; s >>= 1)` (B / 2 or B >> 1; s >>= 1, s /= 2 or s = s >> 1)
_SEQ_HEAD = re.compile(
    rf"^for\s*\(\s*{_TYPE}(?P<s>{_ID})\s*=\s*(?P<b>[\w.]+)\s*(?:/\s*2|>>\s*1)\s*;\s*(?P=s)\s*(?:>\s*0|>=\s*1|!=\s*0)\s*;"
    rf"\s*(?:(?P=s)\s*>>=\s*1|(?P=s)\s*/=\s*2|(?P=s)\s*=\s*(?P=s)\s*>>\s*1)\s*\)$"
)
#: `for (T s = 1; s < B; s *= 2)` (s *= 2, s <<= 1 or s = s * 2)
_INT_HEAD = re.compile(
    rf"^for\s*\(\s*{_TYPE}(?P<s>{_ID})\s*=\s*1\s*;\s*(?P=s)\s*<\s*(?P<b>[\w.]+)\s*;"
    rf"\s*(?:(?P=s)\s*\*=\s*2|(?P=s)\s*<<=\s*1|(?P=s)\s*=\s*(?P=s)\s*\*\s*2)\s*\)$"
)
_SYNC = "__syncthreads();"
#: the three addressings a tree loop may have
TREE_FORMS = ("sequential", "interleaved", "strided")
_MAXMIN = {"fmaxf", "fminf", "max", "min", "fmax", "fmin"}


@dataclass(frozen=True)
class ReductionTree:
    """One reduction-tree loop: its form, stride variable and type, bound, thread index, array
    and how two elements combine (`+=` or a max/min function)."""

    loop: ts.Node
    form: str  # sequential | interleaved | strided
    ty: str
    s: str
    bound: str
    tid: str
    arr: str
    combine: str  # "+" or a function name


def _combine(stmt: str, arr: str, i: str, s: str) -> str | None:
    """The combine of `a[i] += a[i + s];`, `a[i] = a[i] + a[i + s];` or `a[i] = f(a[i], a[i + s]);`."""
    a, j = re.escape(arr), rf"{re.escape(i)}\+{re.escape(s)}"
    if re.fullmatch(rf"{a}\[{re.escape(i)}\]\+={a}\[{j}\];", stmt) or re.fullmatch(
        rf"{a}\[{re.escape(i)}\]={a}\[{re.escape(i)}\]\+{a}\[{j}\];", stmt
    ):
        return "+"
    m = re.fullmatch(rf"{a}\[{re.escape(i)}\]=(\w+)\({a}\[{re.escape(i)}\],{a}\[{j}\]\);", stmt)
    return m.group(1) if m and m.group(1) in _MAXMIN else None


def _statements(body: ts.Node) -> list[ts.Node]:
    if body.type != "compound_statement":
        return [body]
    return [c for c in body.named_children if c.type != "comment"]


def reduction_tree(src: CudaSource, loop: ts.Node) -> ReductionTree | None:
    """The reduction tree `loop` is, in any of the three forms, or None."""
    body = loop.child_by_field_name("body")
    if body is None:
        return None
    head = src.text_bytes[loop.start_byte : body.start_byte].decode().strip()
    stmts = [S.squash(src.text_of(n)) for n in _statements(body)]
    for form, rx in (("sequential", _SEQ_HEAD), ("interleaved", _INT_HEAD)):
        m = rx.match(head)
        if m is None:
            continue
        s, b, ty = m.group("s"), m.group("b"), re.sub(r"\s+", " ", m.group("ty")).strip()
        if len(stmts) == 2 and stmts[1] == _SYNC:
            if form == "sequential":
                g = re.fullmatch(rf"if\((?P<t>[\w.]+)<{s}\)(?:\{{)?(?P<st>.*?;)(?:\}})?", stmts[0])
            else:
                g = re.fullmatch(rf"if\((?P<t>[\w.]+)%\(2\*{s}\)==0\)(?:\{{)?(?P<st>.*?;)(?:\}})?", stmts[0])
            arr = re.match(rf"({_ID})\[", g.group("st")) if g else None
            if g and arr and (c := _combine(g.group("st"), arr.group(1), g.group("t"), s)):
                return ReductionTree(loop, form, ty, s, b, g.group("t"), arr.group(1), c)
        if form == "interleaved" and len(stmts) == 3 and stmts[2] == _SYNC:
            d = re.fullmatch(
                rf"(?:unsignedint|unsigned|int|size_t|uint32_t|uint)(?P<i>{_ID})=2\*{s}\*(?P<t>[\w.]+);",
                stmts[0],
            )
            g = (
                re.fullmatch(rf"if\({d.group('i')}<{re.escape(b)}\)(?:\{{)?(?P<st>.*?;)(?:\}})?", stmts[1])
                if d
                else None
            )
            arr = re.match(rf"({_ID})\[", g.group("st")) if g else None
            if d and g and arr and (c := _combine(g.group("st"), arr.group(1), d.group("i"), s)):
                return ReductionTree(loop, "strided", ty, s, b, d.group("t"), arr.group(1), c)
    return None


def _step(t: ReductionTree, i: str) -> str:
    a = f"{t.arr}[{i}]"
    other = f"{t.arr}[{i} + {t.s}]"
    return f"{a} += {other};" if t.combine == "+" else f"{a} = {t.combine}({a}, {other});"


def reduction_trees(src: CudaSource, forms: tuple[str, ...]) -> list[ReductionTree]:
    """Every reduction-tree loop of a kernel or device function whose form is one of `forms`."""
    out = []
    for f in src.functions:
        if f.kind not in ("kernel", "device"):
            continue
        for loop in S.walk(src.node_for(f)):
            if (
                loop.type == "for_statement"
                and (t := reduction_tree(src, loop)) is not None
                and t.form in forms
            ):
                out.append(t)
    return out


def tree_at(src: CudaSource, site: Site, forms: tuple[str, ...]) -> ReductionTree:
    """The tree of one of `forms` whose loop starts at the site; Refused when there is none."""
    t = next((t for t in reduction_trees(src, forms) if t.loop.start_byte == site.start), None)
    if t is None:
        raise Refused(f"{site.operator}: no reduction tree at line {site.line}")
    return t


def tree_site(op: Operator, src: CudaSource, t: ReductionTree) -> Site:
    what = "sum" if t.combine == "+" else t.combine
    return op.site(
        src,
        t.loop,
        f"{t.form} tree over {t.arr}[{t.bound}] ({what})",
        form=t.form,
        array=t.arr,
        bound=t.bound,
    )


def tree_facts(src: CudaSource, t: ReductionTree) -> list[Precondition]:
    """What makes every addressing of the tree fold the same values: a shared array, a power-of-two
    count, and the thread's own index in the block."""
    fn = S.fn_node_of(t.loop)
    shared = fn is not None and bool(
        re.search(rf"__shared__[^;]*\b{re.escape(t.arr)}\b", src.text_of(fn) + src.text)
    )
    bound = t.bound
    v = S.eval_int(bound, S.file_constants(src))
    pow2 = v is None or S.is_pow2(v)
    tid_ok = t.tid == "threadIdx.x" or (
        fn is not None and S.squash(S.init_text(src, fn, t.tid) or "") == "threadIdx.x"
    )
    return [
        Precondition(
            "shared_array",
            shared,
            f"{t.arr} is a __shared__ array" if shared else f"{t.arr} is not declared __shared__",
            "Storage",
        ),
        Precondition(
            "power_of_two_tree",
            pow2,
            f"the tree folds {bound} values, a power of two (or the block size)"
            if pow2
            else f"{bound} = {v} is not a power of two: the two orders fold different sets",
            "Layout",
        ),
        Precondition(
            "thread_index",
            tid_ok,
            f"{t.tid} is threadIdx.x" if tid_ok else f"{t.tid} is not the thread's index in the block",
            "Layout",
        ),
    ]


def _index_name(src: CudaSource, t: ReductionTree) -> str:
    """A name for the strided index that nothing in the function already uses."""
    fn = S.fn_node_of(t.loop)
    text = src.text_of(fn) if fn is not None else src.text
    name = "index"
    while re.search(rf"\b{name}\b", text):
        name = f"kl_{name}"
    return name


def rewrite_tree(src: CudaSource, t: ReductionTree, to: str) -> CudaSource:
    """The tree loop rewritten in form `to` (sequential | strided | interleaved), same combine."""
    ind = edit.indent_of(src, t.loop)
    inner = f"\n{ind}    "
    if to == "interleaved":
        head = f"for ({t.ty} {t.s} = 1; {t.s} < {t.bound}; {t.s} *= 2)"
        body = f"if ({t.tid} % (2 * {t.s}) == 0) {_step(t, t.tid)}"
    elif to == "strided":
        i = _index_name(src, t)
        head = f"for ({t.ty} {t.s} = 1; {t.s} < {t.bound}; {t.s} *= 2)"
        body = f"{t.ty} {i} = 2 * {t.s} * {t.tid};{inner}if ({i} < {t.bound}) {_step(t, i)}"
    else:
        head = f"for ({t.ty} {t.s} = {t.bound} / 2; {t.s} > 0; {t.s} >>= 1)"
        body = f"if ({t.tid} < {t.s}) {_step(t, t.tid)}"
    text = f"{head} {{{inner}{body}{inner}__syncthreads();\n{ind}}}"
    return edit.apply_edits(src, [edit.replace(t.loop, text)])


class TreeRewrite(Operator):
    """An operator that moves a reduction tree between two of its addressings: backward from the
    form `optimized` to `simpler`, forward from any of `forward_from` to `optimized`."""

    optimized: ClassVar[str]
    simpler: ClassVar[str]
    forward_from: ClassVar[tuple[str, ...]]
    mechanical_apply = True

    def find(self, src: CudaSource) -> list[Site]:
        return [tree_site(self, src, t) for t in reduction_trees(src, (self.optimized,))]

    def find_forward(self, src: CudaSource) -> list[Site]:
        return [tree_site(self, src, t) for t in reduction_trees(src, self.forward_from)]

    def removal_preconditions(self, src: CudaSource, site: Site) -> list[Precondition]:
        return tree_facts(src, tree_at(src, site, TREE_FORMS))

    def preconditions(self, src: CudaSource, site: Site) -> list[Precondition]:
        return tree_facts(src, tree_at(src, site, TREE_FORMS))

    def _remove(self, src: CudaSource, site: Site) -> CudaSource:
        return rewrite_tree(src, tree_at(src, site, (self.optimized,)), self.simpler)

    def _apply(self, src: CudaSource, site: Site) -> CudaSource:
        return rewrite_tree(src, tree_at(src, site, self.forward_from), self.optimized)


class TreeAddressing(TreeRewrite):
    name = "tree_addressing"
    category = "smem_layout"
    intent = (
        "Fold a shared-memory reduction tree with sequential addressing (round s = B/2 .. 1: the first s "
        "threads add the element s further on) instead of a strided index (thread t at 2*s*t) or the "
        "threads at multiples of 2s: accesses consecutive (no bank conflicts), active threads contiguous."
    )
    optimized, simpler, forward_from = "sequential", "strided", ("interleaved", "strided")
