"""Host parameters fixed at every call: an integer parameter of a host function (not the C-ABI
entry point) to which every call in the file passes the same literal becomes a `constexpr` local
of that value, and the calls stop passing it (`void launch_k(..., const int block_size)` called
as `launch_k(..., 256)` reads `constexpr int block_size = 256;`). Launch sizes computed from it
are then known to the operators that check them (a block that is a whole number of warps).

Left alone: a parameter the function writes, a function the file names anywhere but its calls
(a pointer, a declaration), calls that disagree or pass anything but an integer literal.
"""

from __future__ import annotations

import re

from klineage.source import syntax as S
from klineage.source.canon.base import Rule
from klineage.source.canon.templates import deletions
from klineage.source.constructs import Function
from klineage.source.edit import Edit
from klineage.source.model import CudaSource

_INT = re.compile(r"^(?:const\s+)?(?:unsigned\s+int|unsigned|int|size_t|long|int32_t|int64_t)$")
_LITERAL = re.compile(r"^\d+[uUlL]*$")


class HostArgToConstexpr(Rule):
    name = "host_arg_to_constexpr"
    summary = "an integer host-function parameter every call passes the same literal becomes a constexpr"

    def edits(self, src: CudaSource) -> list[Edit]:
        out: list[Edit] = []
        for f in src.functions:
            if f.kind == "host" and not f.is_extern_c and not f.template_params:
                out += _function(src, f)
        return out


def _function(src: CudaSource, f: Function) -> list[Edit]:
    fn = src.node_for(f)
    calls = S.calls_named(src.tree.root_node, re.escape(f.name))
    mentions = [
        n
        for n in S.walk(src.tree.root_node)
        if n.type == "identifier"
        and src.text_of(n) == f.name
        and not fn.start_byte <= n.start_byte < fn.end_byte
    ]
    if not calls or len(mentions) != len(calls) or any(len(S.call_args(c)) != len(f.params) for c in calls):
        return []
    body = fn.child_by_field_name("body")
    written = S.written_names(body, through_access=True) if body is not None else {""}
    fixed: list[tuple[int, str]] = []
    for i, p in enumerate(f.params):
        if not _INT.match(p.type.strip()) or p.is_pointer or p.name in written:
            continue
        values = {S.squash(src.text_of(S.call_args(c)[i])) for c in calls}
        if len(values) == 1 and _LITERAL.match(v := values.pop()):
            fixed.append((i, v))
    if not fixed or body is None:
        return []
    positions = {i for i, _ in fixed}
    edits = deletions(S.param_nodes(fn), positions)
    for c in calls:
        edits += deletions(S.call_args(c), positions)
    decls = "".join(
        f"\n    constexpr {f.params[i].type.replace('const', '').strip()} {f.params[i].name} = {v};"
        for i, v in fixed
    )
    edits.append(Edit(body.start_byte + 1, body.start_byte + 1, decls))
    return edits
