"""One-dimensional launch configurations written at the launch: `dim3 grid(n / 256, 1);
k<<<grid, block>>>` becomes `k<<<n / 256, block>>>` when the `dim3` has one non-unit extent
(x) and is read by launch configurations only. The operators that resize a grid read the launch's
own expressions."""

from __future__ import annotations

import re

import tree_sitter as ts

from klineage.source import edit
from klineage.source import nodes as N
from klineage.source import syntax as S
from klineage.source.canon.base import Rule, host_functions
from klineage.source.edit import Edit
from klineage.source.model import CudaSource

_UNIT = re.compile(r"^1[uU]?$")


def _extent(src: CudaSource, d: ts.Node) -> str | None:
    """x of `dim3 name(x)`, `(x, 1)`, `(x, 1, 1)` or the brace forms; None otherwise."""
    # `dim3 g(n);` parses as a function declarator (the most vexing parse): its "parameter" is n
    value = d.child_by_field_name("parameters" if d.type == "function_declarator" else "value")
    if value is None or value.type not in ("argument_list", "initializer_list", "parameter_list"):
        return None
    args = [c for c in value.named_children if c.type != "comment"]
    if not 1 <= len(args) <= 3 or any(not _UNIT.match(S.squash(src.text_of(a))) for a in args[1:]):
        return None
    if args[0].type == "initializer_list" or S.has_call(args[0], r".*"):
        return None
    return src.text_of(args[0])


class InlineDim3(Rule):
    name = "inline_dim3"
    summary = "a one-dimensional dim3 read only by launch configurations is written at the launches"

    def edits(self, src: CudaSource) -> list[Edit]:
        out: list[Edit] = []
        for fn in host_functions(src):
            configs = [
                c
                for call in S.walk(fn)
                if call.type == "call_expression" and (kcs := N.kernel_call_syntax(call)) is not None
                for c in [x for x in kcs.named_children if x.type != "comment"][:2]
            ]
            for decl in S.walk(fn):
                if decl.type != "declaration":
                    continue
                ty = decl.child_by_field_name("type")
                ds = decl.children_by_field_name("declarator")
                if (
                    ty is None
                    or S.squash(src.text_of(ty)) != "dim3"
                    or len(ds) != 1
                    or ds[0].type not in ("init_declarator", "function_declarator")
                ):
                    continue
                name, x = S.decl_name(decl), _extent(src, ds[0])
                if not name or x is None or name in S.assigned_in(fn):
                    continue
                uses = [
                    n
                    for n in S.walk(fn)
                    if n.type == "identifier"
                    and src.text_of(n) == name
                    and not (decl.start_byte <= n.start_byte < decl.end_byte)
                ]
                if not uses or any(
                    not any(c.start_byte == u.start_byte and c.end_byte == u.end_byte for c in configs)
                    for u in uses
                ):
                    continue
                reads = {
                    src.text_of(n) for n in S.walk(ds[0]) if n.type in ("identifier", "type_identifier")
                } - {name}
                between = src.text_bytes[decl.end_byte : max(u.start_byte for u in uses)].decode()
                if any(
                    re.search(rf"(?<![\w.]){re.escape(r)}\s*(?:[-+*/%&|^]?=(?!=)|\+\+|--)", between)
                    for r in reads
                ):
                    continue
                out += [edit.replace(u, S.paren(x)) for u in uses]
                out.append(edit.delete(src, decl))
        return out
