"""Online (single-pass) softmax normalization: a running max `m` and a running sum `d` rescaled
whenever the max grows: `mn = fmaxf(m, x); d = d * __expf(m - mn) + __expf(x - mn); m = mn;`.

One read of the input yields both the max and the normalizer (the expert saves a full pass over
memory). The backward step splits the loop into two passes over the same elements: first the
max, then the sum of exp(x - max). Per thread this is exact in real arithmetic (with d starting
at 0, the rescaled sum equals the sum against the final max); cross-thread merges of (m, d)
pairs stay valid because each thread still produces a (max, sum against that max) pair.

Idiom-specific: the three statements above (any `fmaxf`/`max`, any of `__expf`/`expf`/`exp`) in
one loop body; and Welford's `mean += delta / n; m2 += delta * (x - mean)` (fields allowed), split
into a count-and-mean pass and a squared-deviation pass over the same loop. Branchy rescales and
other update shapes are refused, naming why.
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

_EXP = r"(?:__expf|expf|exp|__exp)"
_MAX = r"(?:fmaxf|fmax|max)"
_SYNC = r"__syncthreads\w*|__syncwarp|__shfl\w*|atomic\w+|__ballot_sync|\w*::sync"


@dataclass(frozen=True)
class _Online:
    loop: ts.Node
    m: str
    d: str
    mn: str
    mn_stmt: ts.Node  # declaration (or assignment) of mn = max(m, x)
    mn_value: ts.Node  # the max(...) call
    d_stmt: ts.Node
    addend: str  # E in d = d * exp(m - mn) + E
    m_stmt: ts.Node


def _online(src: CudaSource, loop: ts.Node) -> _Online | None:
    body = loop.child_by_field_name("body")
    if body is None or body.type != "compound_statement":
        return None
    stmts = [s for s in body.named_children if s.type != "comment"]
    for i, s in enumerate(stmts):
        t = T.squash(src.text_of(s))
        m = re.fullmatch(rf"(\w+)=\1\*{_EXP}\((\w+)-(\w+)\)\+(.+);", t) or None
        if m is None:
            continue
        d, mv, mn, addend = m.groups()
        m_stmt = next((x for x in stmts[i + 1 :] if T.squash(src.text_of(x)) == f"{mv}={mn};"), None)
        if m_stmt is None:
            continue
        mn_stmt, mn_value = None, None
        for x in stmts[:i]:
            if x.type == "declaration" and T.decl_name(x) == mn:
                v = x.children_by_field_name("declarator")[0].child_by_field_name("value")
                if v is not None and v.type == "call_expression" and re.fullmatch(_MAX, T.call_name(v)):
                    args = [T.squash(src.text_of(a)) for a in T.call_args(v)]
                    if mv in args:
                        mn_stmt, mn_value = x, v
        if mn_stmt is None:
            continue
        # the addend as written (not squashed), from the right side of the assignment
        right = s.named_children[0].child_by_field_name("right")
        add_node = (
            right.child_by_field_name("right")
            if right is not None and right.type == "binary_expression"
            else None
        )
        return _Online(
            loop,
            mv,
            d,
            mn,
            mn_stmt,
            mn_value,
            s,
            src.text_of(add_node) if add_node is not None else addend,
            m_stmt,
        )
    return None


def _welford(src: CudaSource, loop: ts.Node) -> bool:
    t = T.squash(src.text_of(loop))
    return bool(re.search(r"([\w.]+)\+=([\w.]+)/[^;]+;.*?[\w.]+(?:\+=\2\*\(|=fmaf\(\2,)[^;]*-\1\b", t))


@dataclass(frozen=True)
class _Welford:
    loop: ts.Node  # the outermost loop of the function around the update (the pass over memory)
    mean: str
    m2: str
    count_stmt: ts.Node | None  # n += 1 (pass 1 only)
    mean_stmt: ts.Node  # mean += delta / n (pass 1 only)
    m2_stmt: ts.Node  # m2 += delta * (x - mean) (pass 2 only)


def _welford_parts(src: CudaSource, inner: ts.Node) -> _Welford | None:
    """The Welford statements of `inner` (a loop whose body holds them directly)."""
    body = inner.child_by_field_name("body")
    if body is None or body.type != "compound_statement":
        return None
    stmts = [s for s in body.named_children if s.type != "comment"]
    for i, s in enumerate(stmts):
        m = re.fullmatch(r"([\w.]+)\+=(\w+)/([^;]+);", T.squash(src.text_of(s)))
        if m is None:
            continue
        mean, delta, count = m.groups()
        m2_stmt = next(
            (
                x
                for x in stmts[i + 1 :]
                if re.fullmatch(
                    rf"([\w.]+)(?:\+={delta}\*\(.*-{re.escape(mean)}\)|=fmaf\({delta},.*-{re.escape(mean)},\1\));",
                    T.squash(src.text_of(x)),
                )
            ),
            None,
        )
        if m2_stmt is None:
            continue
        m2 = re.match(r"[\w.]+", T.squash(src.text_of(m2_stmt))).group(0)
        count_stmt = next(
            (
                x
                for x in stmts[:i]
                if re.fullmatch(
                    rf"(?:{re.escape(count)}\+=1(?:\.0?f?)?|\+\+{re.escape(count)}|{re.escape(count)}\+\+);",
                    T.squash(src.text_of(x)),
                )
            ),
            None,
        )
        outer, p = inner, inner.parent
        while p is not None and p.type != "function_definition":
            if p.type in ("for_statement", "while_statement"):
                outer = p
            p = p.parent
        return _Welford(outer, mean, m2, count_stmt, s, m2_stmt)
    return None


def _root(name: str) -> str:
    return name.split(".")[0]


class OnlineSoftmax(Operator):
    name = "online_softmax"
    category = "fusion"
    intent = (
        "Compute softmax's max and normalizer in one pass: keep a running max and rescale the running sum "
        "by exp(m_old - m_new) whenever the max grows, saving a full read of the input."
    )

    def find(self, src: CudaSource) -> list[Site]:
        sites = []
        for f in src.functions:
            if f.kind not in ("kernel", "device"):
                continue
            fn = src.node_for(f)
            for n in T.walk(fn):
                if n.type not in ("for_statement", "while_statement"):
                    continue
                o = _online(src, n)
                if o is not None:
                    sites.append(
                        self.site(
                            src,
                            n,
                            f"online max/sum ({o.m}, {o.d}) in {f.name}",
                            form="softmax",
                            m=o.m,
                            d=o.d,
                            function=f.name,
                        )
                    )
                elif _welford(src, n) and not any(
                    _welford(src, c)
                    for c in T.walk(n.child_by_field_name("body") or n)
                    if c.type in ("for_statement", "while_statement") and c != n
                ):
                    w = _welford_parts(src, n)
                    target = w.loop if w is not None else n
                    sites.append(
                        self.site(
                            src,
                            target,
                            f"Welford mean/M2 update in {f.name}",
                            form="welford",
                            function=f.name,
                            mean=w.mean if w else "?",
                            m2=w.m2 if w else "?",
                        )
                    )
        return sites

    def _get(self, src: CudaSource, site: Site) -> _Online | _Welford:
        node = src.node_at(site.anchor)
        if node is None:
            raise Refused(f"{self.name}: site {site.anchor} not found")
        if site.details.get("form") == "welford":
            for n in [node, *[c for c in T.walk(node) if c.type in ("for_statement", "while_statement")]]:
                w = _welford_parts(src, n)
                if w is not None and w.loop == node:
                    return w  # type: ignore[return-value]
            raise Refused(
                f"{self.name}: recognised_update: the Welford update at line {site.line} is not the "
                "`mean += delta / n; m2 += delta * (x - mean)` form"
            )
        o = _online(src, node)
        if o is None:
            raise Refused(f"{self.name}: the loop at line {site.line} no longer has an online max/sum")
        return o

    def _facts(self, src: CudaSource, o: _Online | _Welford) -> list[Precondition]:
        if isinstance(o, _Welford):
            return self._welford_facts(src, o)
        facts = self._loop_facts(src, o.loop, fields=True)
        fn = N.enclosing_function(o.loop)
        body = o.loop.child_by_field_name("body")
        local = set(T.local_decls(body))
        d_init = T.init_text(src, fn, o.d) if fn is not None else None
        d_init_ok = d_init is not None and T.squash(d_init) in ("0", "0.f", "0.0f", "0.0", "0.")
        if not d_init_ok and fn is not None:
            decl = T.local_decls(fn).get(o.d)
            v = (
                decl.child_by_field_name("value")
                if decl is not None and decl.type == "init_declarator"
                else None
            )
            d_init_ok = v is not None and T.squash(src.text_of(v)) in ("0", "0.f", "0.0f", "0.0", "0.")
        facts.append(
            Precondition(
                "sum_starts_at_zero",
                d_init_ok,
                f"{o.d} starts at 0, so the rescaled sum equals the sum against the final max"
                if d_init_ok
                else f"{o.d} does not start at 0",
                "Data types",
            )
        )
        carried = sorted(T.assigned_in(body) - local - {o.m, o.d})
        facts.append(
            Precondition(
                "only_max_and_sum_carried",
                not carried,
                f"the loop also carries {', '.join(carried)}"
                if carried
                else f"only {o.m} and {o.d} flow between iterations",
                "Pipeline",
            )
        )
        return facts

    def _loop_facts(self, src: CudaSource, loop: ts.Node, fields: bool = False) -> list[Precondition]:
        """Both passes rerun the loop: it must restart by itself and do nothing but read memory and
        update locals. A store through a pointer or an array outside the loop stops it; with
        `fields`, a store to a struct field outside the loop too (Welford carries its statistics
        in the fields of a local struct, online softmax only scalars)."""
        init = loop.child_by_field_name("initializer")
        ok = loop.type == "for_statement" and init is not None and init.type == "declaration"
        facts = [
            Precondition(
                "rerunnable_loop",
                ok,
                "the loop declares its own index and can run twice"
                if ok
                else "the loop's index lives outside it: a second pass would not restart",
                "Pipeline",
            )
        ]
        body = loop.child_by_field_name("body")
        local = set(T.local_decls(body))
        targets = ("subscript_expression", "pointer_expression") + (("field_expression",) if fields else ())
        stores = [
            n
            for n in T.walk(body)
            if n.type == "assignment_expression"
            and n.child_by_field_name("left").type in targets
            and _base(src, n.child_by_field_name("left")) not in local
        ]
        bad = stores[:1] + T.calls_named(body, _SYNC)[:1]
        facts.append(
            Precondition(
                "side_effect_free_body",
                not bad,
                f"line {bad[0].start_point.row + 1} writes memory or synchronizes: the body cannot run twice"
                if bad
                else "the body only reads memory and updates locals",
                "Pipeline",
            )
        )
        return facts

    def _welford_facts(self, src: CudaSource, w: _Welford) -> list[Precondition]:
        facts = self._loop_facts(src, w.loop)
        fn = N.enclosing_function(w.loop)
        decl = T.local_decls(fn).get(_root(w.m2)) if fn is not None else None
        v = decl.child_by_field_name("value") if decl is not None and decl.type == "init_declarator" else None
        zero = v is not None and not re.search(r"[1-9]", re.sub(r"\d*\.?0+f?", "", T.squash(src.text_of(v))))
        facts.append(
            Precondition(
                "statistics_start_at_zero",
                zero,
                f"{_root(w.m2)} starts at zero: pass 2 sums squared deviations from the final mean"
                if zero
                else f"{_root(w.m2)} does not start at zero",
                "Data types",
            )
        )
        body = w.loop.child_by_field_name("body")
        carried = sorted(T.assigned_in(body) - set(T.local_decls(body)) - {_root(w.mean), _root(w.m2)})
        facts.append(
            Precondition(
                "only_statistics_carried",
                not carried,
                f"the loop also carries {', '.join(carried)}"
                if carried
                else "only the running statistics flow between iterations",
                "Pipeline",
            )
        )
        return facts

    def removal_preconditions(self, src: CudaSource, site: Site) -> list[Precondition]:
        return self._facts(src, self._get(src, site))

    def preconditions(self, src: CudaSource, site: Site) -> list[Precondition]:
        facts = self.removal_preconditions(src, site)
        if site.details.get("form") == "welford":
            facts.append(
                Precondition(
                    "welford_identity",
                    True,
                    "the running mean/M2 update equals mean and sum of squared "
                    "deviations computed in two passes (up to rounding)",
                    "Data types",
                )
            )
            return facts
        facts.append(
            Precondition(
                "max_rescale_identity",
                True,
                "sum_i exp(x_i - m) = exp(m' - m) * sum_i exp(x_i - m'): rescaling by exp(m_old - m_new) "
                "keeps the normalizer exact up to float rounding",
                "Data types",
            )
        )
        return facts

    def _remove(self, src: CudaSource, site: Site) -> CudaSource:
        o = self._get(src, site)
        if isinstance(o, _Welford):
            return self._remove_welford(src, o)
        loop_text = src.text_of(o.loop)
        base = o.loop.start_byte

        def rewrite(subs: list[tuple[ts.Node | tuple[int, int], str]]) -> str:
            out, pos = [], 0
            for target, text in sorted(subs, key=lambda p: _rng(p[0])[0]):
                a, b = _rng(target)
                out.append(loop_text[pos : a - base] if pos <= a - base else "")
                out.append(text)
                pos = b - base
            out.append(loop_text[pos:])
            return "".join(out)

        # byte offsets equal char offsets only for ASCII; fall back to bytes otherwise
        if len(loop_text) != o.loop.end_byte - o.loop.start_byte:
            raise Refused(f"{self.name}: non-ASCII text in the loop")
        pass1 = rewrite([(_line(src, o.d_stmt), "")])
        pass2 = rewrite(
            [(o.mn_value, o.m), (o.d_stmt, f"{o.d} = {o.d} + {o.addend};"), (_line(src, o.m_stmt), "")]
        )
        ind = edit.indent_of(src, o.loop)
        text = f"// pass 1: the max\n{ind}{pass1}\n{ind}// pass 2: the sum of exp(x - max)\n{ind}{pass2}"
        return edit.apply_edits(src, [edit.replace(o.loop, text)])

    def _remove_welford(self, src: CudaSource, w: _Welford) -> CudaSource:
        loop = w.loop
        if len(src.text_of(loop)) != loop.end_byte - loop.start_byte:
            raise Refused(f"{self.name}: non-ASCII text in the loop")
        pass1 = _cut(src, loop, [_line(src, w.m2_stmt)])
        pass2 = _cut(
            src, loop, [_line(src, w.mean_stmt)] + ([_line(src, w.count_stmt)] if w.count_stmt else [])
        )
        ind = edit.indent_of(src, loop)
        text = (
            f"// pass 1: count and mean\n{ind}{pass1}\n{ind}// pass 2: squared deviations from the final mean\n"
            f"{ind}{pass2}"
        )
        return edit.apply_edits(src, [edit.replace(loop, text)])


def _cut(src: CudaSource, node: ts.Node, ranges: list[tuple[int, int]]) -> str:
    """Text of `node` without the given byte ranges."""
    out, pos = [], node.start_byte
    for a, b in sorted(ranges):
        out.append(src.text_bytes[pos:a].decode())
        pos = b
    out.append(src.text_bytes[pos : node.end_byte].decode())
    return "".join(out)


def _rng(target: ts.Node | tuple[int, int]) -> tuple[int, int]:
    return target if isinstance(target, tuple) else (target.start_byte, target.end_byte)


def _line(src: CudaSource, node: ts.Node) -> tuple[int, int]:
    """The whole line(s) of a statement when only blanks or a trailing comment share them."""
    start, end = edit.lines_of(src, node)
    data = src.text_bytes
    before = data[start : node.start_byte].strip()
    after = data[node.end_byte : end].strip()
    if not before and (not after or after.startswith(b"//")):
        return start, end
    return node.start_byte, node.end_byte


def _base(src: CudaSource, node: ts.Node) -> str:
    n: ts.Node | None = node
    while n is not None and n.type not in ("identifier",):
        n = n.child_by_field_name("argument") or (n.named_children[0] if n.named_children else None)
    return src.text_of(n) if n is not None else ""
