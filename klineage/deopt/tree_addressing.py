"""Sequential addressing in a shared-memory reduction tree.

A block folds `B` shared values into one in log2(B) rounds. With *interleaved* addressing round
`s` (1, 2, 4, ...) lets the threads whose index is a multiple of 2s add their right neighbour at
distance s: the active threads are scattered over every warp (divergence) and their accesses
stride over the banks (conflicts). With *sequential* addressing round `s` (B/2, B/4, ..., 1) lets
the first s threads add the element s further on: the active threads are contiguous and their
accesses consecutive. Both fold the same B values for a power-of-two B; only the order of the
additions differs.

Backward: `for (s = B/2; s > 0; s >>= 1) { if (t < s) a[t] += a[t + s]; __syncthreads(); }`
becomes `for (s = 1; s < B; s *= 2) { if (t % (2 * s) == 0) a[t] += a[t + s]; __syncthreads(); }`.
Forward: the interleaved loop (or its strided-index variant, `i = 2 * s * t; if (i < B) a[i] +=
a[i + s];`) becomes the sequential one. The combine may be `+=`, `a = a + b`, or a max/min call.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

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
_MAXMIN = {"fmaxf", "fminf", "max", "min", "fmax", "fmin"}


@dataclass(frozen=True)
class _Tree:
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


def _tree(src: CudaSource, loop: ts.Node) -> _Tree | None:
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
                return _Tree(loop, form, ty, s, b, g.group("t"), arr.group(1), c)
        if form == "interleaved" and len(stmts) == 3 and stmts[2] == _SYNC:
            d = re.fullmatch(rf"(?:int|unsigned|unsignedint)(?P<i>{_ID})=2\*{s}\*(?P<t>[\w.]+);", stmts[0])
            g = (
                re.fullmatch(rf"if\({d.group('i')}<{re.escape(b)}\)(?:\{{)?(?P<st>.*?;)(?:\}})?", stmts[1])
                if d
                else None
            )
            arr = re.match(rf"({_ID})\[", g.group("st")) if g else None
            if d and g and arr and (c := _combine(g.group("st"), arr.group(1), d.group("i"), s)):
                return _Tree(loop, "strided", ty, s, b, d.group("t"), arr.group(1), c)
    return None


def _step(t: _Tree, i: str) -> str:
    a = f"{t.arr}[{i}]"
    other = f"{t.arr}[{i} + {t.s}]"
    return f"{a} += {other};" if t.combine == "+" else f"{a} = {t.combine}({a}, {other});"


class TreeAddressing(Operator):
    name = "tree_addressing"
    category = "smem_layout"
    intent = (
        "Fold a shared-memory reduction tree with sequential addressing (round s = B/2 .. 1: the first s "
        "threads add the element s further on) instead of interleaved addressing (threads at multiples of 2s): "
        "active threads stay contiguous (no divergence) and accesses consecutive (no bank conflicts)."
    )
    mechanical_apply = True

    def _trees(self, src: CudaSource, forms: tuple[str, ...]) -> list[_Tree]:
        out = []
        for f in src.functions:
            if f.kind not in ("kernel", "device"):
                continue
            for loop in S.walk(src.node_for(f)):
                if loop.type == "for_statement" and (t := _tree(src, loop)) is not None and t.form in forms:
                    out.append(t)
        return out

    def _site(self, src: CudaSource, t: _Tree) -> Site:
        return self.site(
            src,
            t.loop,
            f"{t.form} tree over {t.arr}[{t.bound}] ({'sum' if t.combine == '+' else t.combine})",
            form=t.form,
            array=t.arr,
            bound=t.bound,
        )

    def find(self, src: CudaSource) -> list[Site]:
        return [self._site(src, t) for t in self._trees(src, ("sequential",))]

    def find_forward(self, src: CudaSource) -> list[Site]:
        return [self._site(src, t) for t in self._trees(src, ("interleaved", "strided"))]

    def _at(self, src: CudaSource, site: Site) -> _Tree:
        t = next(
            (
                t
                for t in self._trees(src, ("sequential", "interleaved", "strided"))
                if t.loop.start_byte == site.start
            ),
            None,
        )
        if t is None:
            raise Refused(f"{self.name}: no reduction tree at line {site.line}")
        return t

    def _facts(self, src: CudaSource, site: Site) -> list[Precondition]:
        t = self._at(src, site)
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

    def removal_preconditions(self, src: CudaSource, site: Site) -> list[Precondition]:
        return self._facts(src, site)

    def preconditions(self, src: CudaSource, site: Site) -> list[Precondition]:
        return self._facts(src, site)

    def _rewrite(self, src: CudaSource, t: _Tree, to: str) -> CudaSource:
        ind = edit.indent_of(src, t.loop)
        if to == "interleaved":
            head = f"for ({t.ty} {t.s} = 1; {t.s} < {t.bound}; {t.s} *= 2)"
            test = f"if ({t.tid} % (2 * {t.s}) == 0)"
        else:
            head = f"for ({t.ty} {t.s} = {t.bound} / 2; {t.s} > 0; {t.s} >>= 1)"
            test = f"if ({t.tid} < {t.s})"
        text = f"{head} {{\n{ind}    {test} {_step(t, t.tid)}\n{ind}    __syncthreads();\n{ind}}}"
        return edit.apply_edits(src, [edit.replace(t.loop, text)])

    def _remove(self, src: CudaSource, site: Site) -> CudaSource:
        return self._rewrite(src, self._at(src, site), "interleaved")

    def _apply(self, src: CudaSource, site: Site) -> CudaSource:
        return self._rewrite(src, self._at(src, site), "sequential")
