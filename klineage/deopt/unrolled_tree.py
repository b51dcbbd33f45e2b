"""A reduction tree unrolled completely by hand: one statement per level, the distance halving
(16, 8, 4, 2, 1), each level often guarded by a template block size (`if (blockSize >= 32) v +=
__shfl_down_sync(m, v, 16);`), so the compiler emits straight-line code with the dead levels
removed at compile time.

Backward: the run of statements becomes the loop it unrolls, `for (int kl_off = 16; kl_off > 0;
kl_off >>= 1) { if (blockSize >= 2 * kl_off) v += __shfl_down_sync(m, v, kl_off); }` (the guard
kept with the ratio the levels share). Forward: such a loop, with a literal start, becomes one
statement per level again. The statements are the same but for the one literal that halves, so
both forms run the same operations in the same order.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import tree_sitter as ts

from klineage.deopt.base import Operator, Precondition, Refused, Site
from klineage.source import edit
from klineage.source import syntax as S
from klineage.source.model import CudaSource

_LIT = re.compile(r"(?<![\w.])(\d+)[uU]?(?![\w.])")
_GUARD = re.compile(r"^if\s*\(\s*(?P<p>[A-Za-z_]\w*)\s*>=\s*(?P<c>\d+)\s*\)\s*(?P<st>.*)$", re.S)
_HEAD = re.compile(
    r"^for\s*\(\s*int\s+(?P<v>\w+)\s*=\s*(?P<o>\d+)\s*;\s*(?P=v)\s*>\s*0\s*;\s*"
    r"(?:(?P=v)\s*>>=\s*1|(?P=v)\s*/=\s*2)\s*\)$"
)
VAR = "kl_off"
MIN_LEVELS = 3


@dataclass(frozen=True)
class _Run:
    stmts: tuple[ts.Node, ...]
    template: str  # the statement with `{off}` where the halving literal was
    start: int  # the first level's distance
    guard: str  # the guarded name ('' when unguarded)
    ratio: int  # guard bound / distance


def _level(text: str) -> tuple[str, str, int, list[int], list[str]] | None:
    """(guard name, statement, guard bound, literals, the text around them) of one level."""
    t = " ".join(text.split())
    g, c = "", 0
    if m := _GUARD.match(t):
        g, c, t = m.group("p"), int(m.group("c")), m.group("st").strip()
    if t.startswith("{") or ";" not in t or t.count(";") != 1:
        return None
    parts = _LIT.split(t)
    return g, t, c, [int(x) for x in parts[1::2]], parts[0::2]


def _runs(src: CudaSource, block: ts.Node) -> list[_Run]:
    out: list[_Run] = []
    stmts = [c for c in block.named_children if c.type != "comment"]
    i = 0
    while i < len(stmts):
        best = None
        lv0 = (
            _level(src.text_of(stmts[i]))
            if stmts[i].type in ("expression_statement", "if_statement")
            else None
        )
        if lv0 is not None:
            for pos, first in enumerate(lv0[3]):
                j, prev = i + 1, first
                while j < len(stmts) and stmts[j].type == stmts[i].type and prev > 1:
                    lv = _level(src.text_of(stmts[j]))
                    if lv is None or lv[0] != lv0[0] or lv[4] != lv0[4] or len(lv[3]) != len(lv0[3]):
                        break
                    if any(a != b for k, (a, b) in enumerate(zip(lv[3], lv0[3], strict=True)) if k != pos):
                        break
                    if lv[3][pos] * 2 != prev or (lv0[0] and lv[2] * first != lv0[2] * lv[3][pos]):
                        break
                    prev, j = lv[3][pos], j + 1
                if (
                    j - i >= MIN_LEVELS
                    and prev == 1
                    and first & (first - 1) == 0
                    and (best is None or j > best[0])
                ):
                    best = (j, pos)
        if best is None:
            i += 1
            continue
        j, pos = best
        parts = list(lv0[4])
        lits = [str(x) for x in lv0[3]]
        lits[pos] = "{off}"
        template = "".join(p + (lits[k] if k < len(lits) else "") for k, p in enumerate(parts))
        ratio = lv0[2] // lv0[3][pos] if lv0[0] else 0
        if lv0[0] and ratio * lv0[3][pos] != lv0[2]:
            i += 1
            continue
        out.append(_Run(tuple(stmts[i:j]), template, lv0[3][pos], lv0[0], ratio))
        i = j
    return out


class UnrolledTree(Operator):
    name = "unrolled_tree"
    category = "template"
    intent = (
        "Unroll a halving reduction tree completely by hand (one statement per level, 16, 8, 4, 2, 1), each "
        "level guarded by the template block size, so the compiler emits straight-line code and drops the "
        "levels a smaller block does not need."
    )
    mechanical_apply = True

    def _all_runs(self, src: CudaSource) -> list[_Run]:
        out = []
        for f in src.functions:
            if f.kind in ("kernel", "device"):
                out += [
                    r
                    for b in S.walk(src.node_for(f))
                    if b.type == "compound_statement"
                    for r in _runs(src, b)
                ]
        return out

    def find(self, src: CudaSource) -> list[Site]:
        return [
            self.site(
                src,
                r.stmts[0],
                f"{len(r.stmts)} unrolled levels ({r.start} .. 1)"
                + (f" guarded by {r.guard}" if r.guard else ""),
                levels=str(len(r.stmts)),
            )
            for r in self._all_runs(src)
        ]

    def _remove(self, src: CudaSource, site: Site) -> CudaSource:
        r = next((r for r in self._all_runs(src) if r.stmts[0].start_byte == site.start), None)
        if r is None:
            raise Refused(f"{self.name}: no unrolled tree at line {site.line}")
        fn = S.fn_node_of(r.stmts[0])
        if fn is not None and S.uses_ident(fn, VAR):
            raise Refused(f"{self.name}: {VAR} is taken")
        ind = edit.indent_of(src, r.stmts[0])
        body = r.template.format(off=VAR)
        if r.guard:
            body = f"if ({r.guard} >= {r.ratio} * {VAR}) {body}"
        loop = f"for (int {VAR} = {r.start}; {VAR} > 0; {VAR} >>= 1) {{\n{ind}    {body}\n{ind}}}"
        return edit.apply_edits(src, [edit.Edit(r.stmts[0].start_byte, r.stmts[-1].end_byte, loop)])

    # ---- forward ------------------------------------------------------------------------------
    def _loops(self, src: CudaSource) -> list[tuple[ts.Node, str, int, str]]:
        """(loop, variable, start, the one body statement) of halving loops with a literal start."""
        out = []
        for loop in src.nodes_of_type("for_statement"):
            body = loop.child_by_field_name("body")
            if body is None or S.fn_node_of(loop) is None:
                continue
            head = " ".join(src.text_bytes[loop.start_byte : body.start_byte].decode().split())
            m = _HEAD.match(head)
            inner = (
                [c for c in body.named_children if c.type != "comment"]
                if body.type == "compound_statement"
                else [body]
            )
            if m is None or len(inner) != 1 or S.assigned_in(inner[0]) & {m.group("v")}:
                continue
            start = int(m.group("o"))
            if start & (start - 1) or start < 2 ** (MIN_LEVELS - 1):
                continue
            out.append((loop, m.group("v"), start, src.text_of(inner[0])))
        return out

    def find_forward(self, src: CudaSource) -> list[Site]:
        return [
            self.site(src, loop, f"halving loop over {var} from {start}", var=var)
            for loop, var, start, _ in self._loops(src)
        ]

    def preconditions(self, src: CudaSource, site: Site) -> list[Precondition]:
        found = next((x for x in self._loops(src) if x[0].start_byte == site.start), None)
        ok = (
            found is not None
            and re.search(rf"(?<![\w.]){re.escape(found[1])}(?![\w.])", found[3]) is not None
        )
        return [
            Precondition(
                "compile_time_levels",
                ok,
                "the loop starts at a literal power of two and halves to 1"
                if ok
                else "not a halving loop with a literal start",
                "Layout",
            )
        ]

    def _apply(self, src: CudaSource, site: Site) -> CudaSource:
        loop, var, start, stmt = next(x for x in self._loops(src) if x[0].start_byte == site.start)
        ind = edit.indent_of(src, loop)
        levels, off = [], start
        while off >= 1:
            text = re.sub(rf"(?<![\w.]){re.escape(var)}(?![\w.])", str(off), stmt)
            text = re.sub(
                r"(?<![\w.])(\d+)\s*\*\s*(\d+)(?![\w.])",
                lambda m: str(int(m.group(1)) * int(m.group(2))),
                text,
            )
            levels.append(text)
            off //= 2
        text, start_byte = f"\n{ind}".join(levels), loop.start_byte
        pragma = src.pragma_of(loop)
        if pragma is not None:  # the loop's unroll pragma goes too (it must precede a loop)
            text, start_byte = ind + text, src.line_start(pragma.line)
        return edit.apply_edits(src, [edit.Edit(start_byte, loop.end_byte, text)])
