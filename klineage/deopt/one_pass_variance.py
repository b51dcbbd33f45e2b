"""One-pass variance: a row's variance as E[x^2] - E[x]^2, the sum of squares accumulated in the
same loop as the sum, instead of a second pass over the row for the squared deviations from the
mean (one read of the row instead of two).

Backward (`remove`), on a loop `for (i = 0; i < N; ++i) { ...; s += e; q += e * e; }` whose sums
reach `var = Q - M * M` only through copies (`float m = s;`) and one division each by N (`q /= N`
or `float m = s / N;`): the square accumulation goes, and `var` is the mean of the squared
deviations, computed by a second loop with the same header that re-reads `e` (its declarations
in the first loop are repeated) after the mean is known. Forward (`apply`) on that two-pass form:
the second loop goes and the first accumulates the squares, `var` reads `q / N - M * M`.

Idiom-specific: the loop runs from 0 by one (one thread per row: a strided or reduced sum is a
row mapping's business, removed first), the element `e` is a name the loop body declares or an
expression of the loop variable, and nothing else reads the sums.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import tree_sitter as ts

from klineage.deopt import _threads as T
from klineage.deopt.base import Operator, Precondition, Refused, Site
from klineage.source import edit
from klineage.source.model import CudaSource

_STEP = re.compile(r"^(?:\+\+(\w+)|(\w+)\+\+|(\w+)\+=1)$")


@dataclass(frozen=True)
class _TwoPass:
    first: ts.Node  # the loop summing the element
    init: ts.Node  # `float var = 0.0f;`
    second: ts.Node  # the loop summing squared deviations
    divide: ts.Node  # `var /= N;`
    var: str
    mean: str
    count: str
    element: str


@dataclass(frozen=True)
class _OnePass:
    loop: ts.Node
    square: ts.Node  # the statement `q += e * e;`
    var_decl: ts.Node  # `float var = Q - M * M;`
    var: str
    mean: str  # M: the mean's name at the variance
    count: str  # N: the loop bound
    element: str  # e
    header: str  # `for (int i = 0; i < N; ++i)`
    decls: str  # the loop body's declarations `e` reads, as written


def _header(src: CudaSource, loop: ts.Node) -> tuple[str, str] | None:
    """(loop variable, bound) of `for (int i = 0; i < N; ++i)`; None for any other header."""
    init, cond, upd = (loop.child_by_field_name(f) for f in ("initializer", "condition", "update"))
    if init is None or cond is None or upd is None:
        return None
    m = re.fullmatch(r"(?:int|unsigned|size_t|long)(\w+)=0;?", T.squash(src.text_of(init)))
    c = re.fullmatch(r"(\w+)<(\w+)", T.squash(src.text_of(cond)))
    s = _STEP.match(T.squash(src.text_of(upd)))
    if m is None or c is None or s is None or c.group(1) != m.group(1) or m.group(1) not in s.groups():
        return None
    return m.group(1), c.group(2)


def _statements(block: ts.Node) -> list[ts.Node]:
    return [c for c in block.named_children if c.type != "comment"]


def _derived(
    src: CudaSource, after: list[ts.Node], root: str, count: str
) -> tuple[set[str], bool, ts.Node | None] | None:
    """Names holding `root` through copies, whether one division by `count` happened on the way
    (twice is None), and the first statement that uses them otherwise (None: none does)."""
    names, divided = {root}, False
    for st in after:
        t = T.squash(src.text_of(st)).rstrip(";")
        used = names & set(re.findall(r"[A-Za-z_]\w*", t))
        if not used:
            continue
        if m := re.fullmatch(r"(?:const)?(?:float|double)(\w+)=(\w+)", t):
            if m.group(2) in names:
                names.add(m.group(1))
                continue
        if m := re.fullmatch(r"(?:const)?(?:float|double)(\w+)=(\w+)/\(?(?:float|\(float\))?\)?(\w+)", t):
            if m.group(2) in names and m.group(3) == count and not divided:
                names.add(m.group(1))
                divided = True
                continue
        if (m := re.fullmatch(r"(\w+)/=(\w+)", t)) and m.group(1) in names and m.group(2) == count:
            if divided:
                return None
            divided = True
            continue
        return names, divided, st  # the first other use: the variance, or a refusal the caller sees
    return names, divided, None


def _one_pass(src: CudaSource, loop: ts.Node) -> _OnePass | Precondition:
    fail = lambda why: Precondition("one_pass_variance", False, why, "Dataflow")  # noqa: E731
    head = _header(src, loop)
    body = loop.child_by_field_name("body")
    block = loop.parent
    if head is None or body is None or block is None or block.type != "compound_statement":
        return fail("the loop is not `for (i = 0; i < N; ++i)` in a block")
    sums: dict[str, str] = {}
    squares: dict[str, tuple[str, ts.Node]] = {}
    for st in _statements(body) if body.type == "compound_statement" else [body]:
        t = T.squash(src.text_of(st)).rstrip(";")
        if m := re.fullmatch(r"(\w+)\+=(\w+)\*(\w+)", t):
            if m.group(2) == m.group(3):
                squares[m.group(1)] = (m.group(2), st)
                continue
        if m := re.fullmatch(r"(\w+)\+=(\w+)", t):
            sums[m.group(1)] = m.group(2)
    pairs = [(s, q) for q, (e, _) in squares.items() for s, e2 in sums.items() if e2 == e]
    if len(pairs) != 1:
        return fail("no loop sums an element and its square")
    s, q = pairs[0]
    element, square = squares[q]
    after = _statements(block)
    after = after[after.index(loop) + 1 :]
    ds, dq = _derived(src, after, s, head[1]), _derived(src, after, q, head[1])
    if ds is None or dq is None or not ds[1]:
        return fail("the sums do not reach a mean through copies and one division by the count")
    for st in after:
        t = T.squash(src.text_of(st)).rstrip(";")
        # `Q - M * M` with Q divided on the way, or `Q / N - M * M` with Q the undivided sum
        m = re.fullmatch(rf"(?:float|double)(\w+)=(\w+)(/{re.escape(head[1])})?-(\w+)\*(\w+)", t)
        if (
            m
            and m.group(2) in dq[0]
            and bool(m.group(3)) != dq[1]
            and m.group(4) == m.group(5)
            and m.group(4) in ds[0]
        ):
            decls = [
                src.text_of(d)
                for d in _statements(body)
                if body.type == "compound_statement"
                if d.type == "declaration" and re.search(rf"\b{re.escape(element)}\b", src.text_of(d))
            ]
            reads_q = dq[2] != st or any(
                n.type == "identifier"
                and src.text_of(n) in dq[0]
                and not square.start_byte <= n.start_byte < square.end_byte
                for x in [*after[after.index(st) + 1 :], body]
                for n in T.walk(x)
            )
            if reads_q:
                return fail("the sum of squares is read elsewhere than by the variance")
            return _OnePass(
                loop,
                square,
                st,
                m.group(1),
                m.group(4),
                head[1],
                element,
                src.text_of(loop)[: body.start_byte - loop.start_byte].strip(),
                "\n".join(decls),
            )
    return fail("no `var = E[x^2] - mean * mean` follows the loop")


class OnePassVariance(Operator):
    name = "one_pass_variance"
    category = "fusion"
    intent = (
        "Accumulate the sum of squares in the same loop as the sum and take the variance as "
        "E[x^2] - mean^2: one read of the row instead of a second pass for the squared deviations."
    )
    mechanical_apply = True

    def find(self, src: CudaSource) -> list[Site]:
        sites = []
        for k in src.kernels:
            for loop in T.walk(src.node_for(k)):
                if loop.type == "for_statement" and isinstance(f := _one_pass(src, loop), _OnePass):
                    sites.append(
                        self.site(
                            src, loop, f"one-pass variance {f.var} of {f.element} in {k.name}", kernel=k.name
                        )
                    )
        return sites

    def removal_preconditions(self, src: CudaSource, site: Site) -> list[Precondition]:
        node = src.node_at(site.anchor)
        if node is None or node.type != "for_statement":
            return [Precondition("one_pass_variance", False, "no loop at this site", "Dataflow")]
        f = _one_pass(src, node)
        if isinstance(f, Precondition):
            return [f]
        return [
            Precondition(
                "one_pass_variance",
                True,
                f"{f.var} = E[{f.element}^2] - {f.mean}^2 over {f.count}",
                "Dataflow",
            )
        ]

    def find_forward(self, src: CudaSource) -> list[Site]:
        sites = []
        for k in src.kernels:
            for loop in T.walk(src.node_for(k)):
                if loop.type == "for_statement" and (f := _two_pass(src, loop)) is not None:
                    sites.append(
                        self.site(
                            src, loop, f"two-pass variance {f.var} of {f.element} in {k.name}", kernel=k.name
                        )
                    )
        return sites

    def preconditions(self, src: CudaSource, site: Site) -> list[Precondition]:
        node = src.node_at(site.anchor)
        f = _two_pass(src, node) if node is not None and node.type == "for_statement" else None
        return [
            Precondition(
                "two_pass_variance",
                f is not None,
                f"{f.var} is the mean of ({f.element} - {f.mean})^2 over the loop that sums {f.element}"
                if f is not None
                else "no second pass of squared deviations from the first loop's mean here",
                "Dataflow",
            )
        ]

    def _apply(self, src: CudaSource, site: Site) -> CudaSource:
        node = src.node_at(site.anchor)
        f = _two_pass(src, node) if node is not None else None
        if f is None:
            raise Refused(f"{self.name}: the site changed")
        body = f.first.child_by_field_name("body")
        indent = " " * f.first.start_point[1]
        close = body.end_byte - 1
        return edit.apply_edits(
            src,
            [
                edit.Edit(f.first.start_byte, f.first.start_byte, f"float kl_sq = 0.0f;\n{indent}"),
                edit.Edit(close, close, f"    kl_sq += {f.element} * {f.element};\n{indent}"),
                edit.Edit(
                    f.init.start_byte,
                    f.divide.end_byte,
                    f"float {f.var} = kl_sq / {f.count} - {f.mean} * {f.mean};",
                ),
            ],
        )

    def _remove(self, src: CudaSource, site: Site) -> CudaSource:
        node = src.node_at(site.anchor)
        f = _one_pass(src, node) if node is not None else None
        if not isinstance(f, _OnePass):
            raise Refused(f"{self.name}: the site changed")
        indent = " " * f.var_decl.start_point[1]
        decls = "".join(f" {d}" for d in f.decls.splitlines())
        two_pass = (
            f"float {f.var} = 0.0f;\n"
            f"{indent}{f.header} {{{decls} const float kl_d = {f.element} - {f.mean}; {f.var} += kl_d * kl_d; }}\n"
            f"{indent}{f.var} /= {f.count};"
        )
        return edit.apply_edits(src, [edit.delete(src, f.square), edit.replace(f.var_decl, two_pass)])


def _deviation_loop(src: CudaSource, loop: ts.Node) -> tuple[str, str, str, list[str]] | None:
    """(var, element, mean, the body's declarations) of `for (...) { decls; const float d = e - M;
    var += d * d; }` or `var += (e - M) * (e - M)`."""
    body = loop.child_by_field_name("body")
    sts = _statements(body) if body is not None and body.type == "compound_statement" else []
    if not sts:
        return None
    t = [T.squash(src.text_of(x)).rstrip(";") for x in sts]
    if len(t) >= 2 and (d := re.fullmatch(r"(?:const)?(?:float|double)(\w+)=(\w+)-(\w+)", t[-2])):
        if re.fullmatch(rf"(\w+)\+={d.group(1)}\*{d.group(1)}", t[-1]):
            decls = [src.text_of(x) for x in sts[:-2]]
            return t[-1].split("+=")[0], d.group(2), d.group(3), decls
    if m := re.fullmatch(r"(\w+)\+=\((\w+)-(\w+)\)\*\(\2-\3\)", t[-1]):
        return m.group(1), m.group(2), m.group(3), [src.text_of(x) for x in sts[:-1]]
    return None


def _two_pass(src: CudaSource, second: ts.Node) -> _TwoPass | None:
    head, dev, block = _header(src, second), _deviation_loop(src, second), second.parent
    if head is None or dev is None or block is None or block.type != "compound_statement":
        return None
    var, element, mean, decls = dev
    sts = _statements(block)
    i = sts.index(second)
    if i == 0 or i + 1 >= len(sts):
        return None
    init, divide = sts[i - 1], sts[i + 1]
    if not re.fullmatch(rf"(?:float|double){var}=0(?:\.0*)?f?;", T.squash(src.text_of(init))):
        return None
    if T.squash(src.text_of(divide)) != f"{var}/={head[1]};":
        return None
    for first in reversed(sts[: i - 1]):
        if first.type != "for_statement" or _header(src, first) != head:
            continue
        body = first.child_by_field_name("body")
        inner = _statements(body) if body is not None and body.type == "compound_statement" else []
        texts = [T.squash(src.text_of(x)).rstrip(";") for x in inner]
        if not all(T.squash(d).rstrip(";") in texts for d in decls):
            return None
        sums = [m.group(1) for x in texts if (m := re.fullmatch(rf"(\w+)\+={element}", x))]
        later = sts[sts.index(first) + 1 : i - 1]
        if len(sums) == 1 and (d := _derived(src, later, sums[0], head[1])) and d[1] and mean in d[0]:
            return _TwoPass(first, init, second, divide, var, mean, head[1], element)
        return None
    return None
