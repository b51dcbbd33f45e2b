"""One spelling of the block barrier: `__syncthreads()`.

Cooperative groups spell it `cg::sync(block)`, `block.sync()` or `cg::this_thread_block().sync()`
where `block` is the thread block (`cg::thread_block block = cg::this_thread_block();`). A
declaration left with no use goes too. Tiles (`tiled_partition`) are warps, not the block, and
stay as they are.
"""

from __future__ import annotations

import re

import tree_sitter as ts

from klineage.source import edit
from klineage.source import syntax as S
from klineage.source.canon.base import Rule
from klineage.source.edit import Edit
from klineage.source.model import CudaSource

_NS = r"(?:cg|cooperative_groups|namespace_cg)"
_THIS_BLOCK = re.compile(rf"^(?:{_NS}::)?this_thread_block\(\)$")
_BLOCK_TYPE = re.compile(rf"^(?:const)?(?:(?:{_NS}::)?thread_block|auto)&?$")


def block_groups(src: CudaSource, fn: ts.Node) -> dict[str, ts.Node]:
    """name -> declaration of the locals in `fn` that hold the thread block."""
    out = {}
    for decl in S.walk(fn):
        if decl.type != "declaration":
            continue
        ty = decl.child_by_field_name("type")
        ds = decl.children_by_field_name("declarator")
        if ty is None or len(ds) != 1 or ds[0].type != "init_declarator":
            continue
        quals = "".join(src.text_of(c) for c in decl.children if c.type == "type_qualifier")
        value = ds[0].child_by_field_name("value")
        name = S.decl_name(decl)
        if (
            name
            and value is not None
            and _BLOCK_TYPE.match(quals + S.squash(src.text_of(ty)))
            and _THIS_BLOCK.match(S.squash(src.text_of(value)))
        ):
            out[name] = decl
    return out


class BarrierSpelling(Rule):
    name = "barrier_spelling"
    summary = "cooperative-groups barriers over the thread block are written __syncthreads()"

    def edits(self, src: CudaSource) -> list[Edit]:
        out: list[Edit] = []
        for f in src.functions:
            if f.kind not in ("kernel", "device"):
                continue
            fn = src.node_for(f)
            groups = block_groups(src, fn)
            replaced: dict[str, int] = {}
            for call in S.calls_named(fn, r".*sync"):
                g = self._group(src, call, groups)
                if g is None:
                    continue
                out.append(edit.replace(call, "__syncthreads()"))
                if g:
                    replaced[g] = replaced.get(g, 0) + 1
            for g, n in replaced.items():
                uses = sum(1 for x in S.walk(fn) if x.type == "identifier" and src.text_of(x) == g)
                if uses == n + 1:  # the declaration and the barriers were its only uses
                    out.append(edit.delete(src, groups[g]))
        return out

    @staticmethod
    def _group(src: CudaSource, call: ts.Node, groups: dict[str, ts.Node]) -> str | None:
        """The block group a barrier call synchronizes ('' for an inline this_thread_block()),
        or None when the call is not a block barrier."""
        name = S.call_name(call)
        args = S.call_args(call)
        if re.fullmatch(rf"{_NS}::sync", name) and len(args) == 1:
            a = S.squash(src.text_of(args[0]))
            if a in groups:
                return a
            return "" if _THIS_BLOCK.match(a) else None
        fexpr = call.child_by_field_name("function")
        if args or fexpr is None or fexpr.type != "field_expression":
            return None
        field = fexpr.child_by_field_name("field")
        obj = fexpr.child_by_field_name("argument")
        if field is None or obj is None or src.text_of(field) != "sync":
            return None
        o = S.squash(src.text_of(obj))
        if o in groups:
            return o
        return "" if _THIS_BLOCK.match(o) else None
