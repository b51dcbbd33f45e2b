"""One spelling of the global thread index: `blockIdx.x * blockDim.x + threadIdx.x` (any axis),
whatever order of terms and factors the author wrote."""

from __future__ import annotations

import re

from klineage.source import edit
from klineage.source import syntax as S
from klineage.source.canon.base import Rule
from klineage.source.edit import Edit
from klineage.source.model import CudaSource

_FORMS = [
    re.compile(p)
    for p in (
        r"^threadIdx\.(?P<a>[xyz])\+\(?blockIdx\.(?P=a)\*blockDim\.(?P=a)\)?$",
        r"^threadIdx\.(?P<a>[xyz])\+\(?blockDim\.(?P=a)\*blockIdx\.(?P=a)\)?$",
        r"^\(?blockDim\.(?P<a>[xyz])\*blockIdx\.(?P=a)\)?\+threadIdx\.(?P=a)$",
    )
]


class ThreadIndexSpelling(Rule):
    name = "thread_index_spelling"
    summary = "the global thread index is written blockIdx * blockDim + threadIdx"

    def edits(self, src: CudaSource) -> list[Edit]:
        out = []
        for n in src.nodes_of_type("binary_expression"):
            t = S.squash(src.text_of(n))
            for rx in _FORMS:
                if m := rx.match(t):
                    a = m.group("a")
                    new = f"blockIdx.{a} * blockDim.{a} + threadIdx.{a}"
                    p = n.parent
                    if p is not None and p.type not in (
                        "init_declarator",
                        "parenthesized_expression",
                        "assignment_expression",
                        "argument_list",
                        "subscript_argument_list",
                        "condition_clause",
                    ):
                        new = f"({new})"
                    out.append(edit.replace(n, new))
                    break
        return out
