"""Register reallocation between warpgroups (`setmaxnreg`, sm_90a).

A warp-specialized Hopper kernel gives its producer warpgroup few registers (`setmaxnreg.dec`)
and its consumers many (`setmaxnreg.inc`), so that wide accumulators fit where the launch bound
alone would spill. Removal deletes every `setmaxnreg` asm statement of the file at once (one site:
a decrease only means something with the increase it pays for); ptxas then fits every path in
the registers the launch bound gives. That keeps the function: the instruction moves registers,
it computes nothing. The forward step adds the pair where a kernel has producer and consumer
warpgroups, which needs their roles read from the code: no mechanical `apply`.
"""

from __future__ import annotations

import re

import tree_sitter as ts

from klineage.deopt import _cexpr as X
from klineage.deopt.base import Operator, Site
from klineage.source import edit
from klineage.source.model import CudaSource

SETMAXNREG = re.compile(r"^\s*setmaxnreg\.(?:inc|dec)\.sync\.aligned\.u32\s+(?:%\d+|\d+)\s*;?\s*$")


def _statements(src: CudaSource) -> list[ts.Node]:
    return [
        X.asm_statement(asm)
        for fn in X.code_functions(src)
        for asm in X.walk(fn)
        if asm.type == "gnu_asm_expression" and SETMAXNREG.match(X.asm_template(src, asm))
    ]


class SetMaxNReg(Operator):
    name = "setmaxnreg"
    category = "tuning"
    intent = (
        "Move registers between warpgroups with setmaxnreg: the producer gives up registers "
        "(setmaxnreg.dec) so the consumers' accumulators fit (setmaxnreg.inc) without spilling."
    )

    def find(self, src: CudaSource) -> list[Site]:
        stmts = _statements(src)
        if not stmts:
            return []
        return [self.site(src, stmts[0], f"{len(stmts)} setmaxnreg statement(s)", count=str(len(stmts)))]

    def _remove(self, src: CudaSource, site: Site) -> CudaSource:
        return edit.apply_edits(src, [edit.delete(src, s) for s in _statements(src)])
