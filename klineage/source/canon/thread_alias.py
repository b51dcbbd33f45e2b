"""A local that only renames a thread coordinate (`const int tid = threadIdx.x;`) reads as the
coordinate itself, and the declaration goes. The block and row operators test `threadIdx.x` where
it stands (a block-strided loop's start, the `threadIdx.x == 0` fold); an alias hid those roles
(llm.c's block-per-row softmax reads the thread through `tid`).

Left alone: an alias the kernel writes or takes the address of, one declared more than once,
a non-integer alias, and one any use of which subtracts or negates: `threadIdx.x` is unsigned, so
`tid - 1` would wrap where the `int` went negative.
"""

from __future__ import annotations

import re

import tree_sitter as ts

from klineage.source import edit
from klineage.source import syntax as S
from klineage.source.canon.base import Rule
from klineage.source.edit import Edit
from klineage.source.model import CudaSource

_COORD = re.compile(r"^threadIdx\.[xyz]$")
_INT = re.compile(r"^(?:const\s+)?(?:unsigned\s+int|unsigned|int|int32_t|uint32_t)$")
#: parents of a use under which the unsigned coordinate could differ from the signed alias
_SIGN_SENSITIVE = ("-",)


class ThreadIndexAlias(Rule):
    name = "thread_index_alias"
    summary = "a local that only renames threadIdx reads as threadIdx"

    def edits(self, src: CudaSource) -> list[Edit]:
        out: list[Edit] = []
        for f in src.functions:
            if f.kind in ("kernel", "device"):
                fn = src.node_for(f)
                for decl in _alias_decls(src, fn):
                    out += _inline(src, fn, decl)
        return out


def _alias_decls(src: CudaSource, fn: ts.Node) -> list[ts.Node]:
    """Declarations of exactly one integer local initialised to a bare thread coordinate."""
    out = []
    for n in S.walk(fn):
        if n.type != "declaration" or len(n.children_by_field_name("declarator")) != 1:
            continue
        d = n.child_by_field_name("declarator")
        v = d.child_by_field_name("value") if d is not None and d.type == "init_declarator" else None
        ty = " ".join(src.text_of(n)[: d.start_byte - n.start_byte].split()) if d is not None else ""
        if v is not None and _COORD.match(S.squash(src.text_of(v))) and _INT.match(ty):
            out.append(n)
    return out


def _inline(src: CudaSource, fn: ts.Node, decl: ts.Node) -> list[Edit]:
    d = decl.child_by_field_name("declarator")
    name = S.declarator_ident(d) if d is not None else None
    value = d.child_by_field_name("value") if d is not None else None
    if name is None or value is None or name in S.written_names(fn, through_access=True):
        return []
    if (
        sum(
            1 for n in S.walk(fn) if n.type in ("declaration", "parameter_declaration") and _declares(n, name)
        )
        != 1
    ):
        return []
    uses = [
        n
        for n in S.walk(fn)
        if n.type == "identifier"
        and n.text == name.encode()
        and not d.start_byte <= n.start_byte < d.end_byte
    ]
    if any(_sign_sensitive(u) for u in uses):
        return []
    coord = S.squash(src.text_of(value))
    # the declaration's line stays (empty): later lines keep their numbers, which sites report
    return [edit.replace(decl, "")] + [edit.replace(u, coord) for u in uses]


def _declares(decl: ts.Node, name: str) -> bool:
    return any(S.declarator_ident(d) == name for d in decl.children_by_field_name("declarator"))


def _sign_sensitive(use: ts.Node) -> bool:
    """The use (through parentheses) is an operand of a subtraction or a negation."""
    n = use
    while n.parent is not None and n.parent.type == "parenthesized_expression":
        n = n.parent
    p = n.parent
    if p is None:
        return False
    if p.type in ("binary_expression", "unary_expression"):
        op = p.child_by_field_name("operator")
        return op is not None and op.type in _SIGN_SENSITIVE
    return False
