"""A lane guard ahead of full-warp collectives reads as the guard of the whole warp.

`if (threadIdx.x >= E) return;` at a kernel's top, followed (at the top, under no branch) by a
collective over the full warp (`__shfl*_sync(0xffffffff, ...)`, `__syncwarp()`), with every early
return in between on a warp-uniform condition, becomes `if (threadIdx.x / 32 * 32 >= E) return;`:
the test of the warp's first lane.

Why it is the same kernel: a warp whose lanes all fail the guard runs on under both; a warp whose
lanes all pass it (its first lane among them) returns under both. A warp split by the guard leaves
lanes that reach the full-mask collective with lanes of their mask exited, which CUDA leaves
undefined (llm.c's online softmax waits in `__syncwarp` on exited lanes below C = block size; the
emulator reports it): no execution the original defines tells the two apart. The warp operators
then read the guard as a test of the warp's index (warp_per_row maps it to the row's warp).

Left alone: a bound that reads the thread index, a guard with an else branch or other statements,
and a kernel with a lane-dependent return, or no unconditional full-mask collective, after it.
"""

from __future__ import annotations

import re

import tree_sitter as ts

from klineage.source import edit
from klineage.source import syntax as S
from klineage.source.canon.base import Rule
from klineage.source.edit import Edit
from klineage.source.model import CudaSource

WARP = 32
_GUARD = re.compile(r"^\(?threadIdx\.x>=(.+?)\)?$")
_FULL = r"(?:0x[fF]{8}[uU]?|~0[uU]?|-1|0xffffffffu)"
_COLLECTIVE = re.compile(rf"__syncwarp\(\)|__syncwarp\({_FULL}\)|__shfl\w*_sync\({_FULL},")
#: a warp's index within its block, as the warp-uniform reads of threadIdx.x are written
_WARP_INDEX = re.compile(r"threadIdx\.x(?:/(?:32|warpSize)|>>5)")
_BRANCHES = (
    "if_statement",
    "conditional_expression",
    "while_statement",
    "switch_statement",
    "lambda_expression",
)


class WarpUniformLaneGuard(Rule):
    name = "warp_uniform_lane_guard"
    summary = "a lane guard ahead of full-warp collectives tests the warp's first lane"

    def edits(self, src: CudaSource) -> list[Edit]:
        out: list[Edit] = []
        for k in src.kernels:
            body = src.node_for(k).child_by_field_name("body")
            if body is not None:
                out += _guard_edits(src, body)
        return out


def _guard_edits(src: CudaSource, body: ts.Node) -> list[Edit]:
    stmts = list(body.named_children)
    for i, s in enumerate(stmts):
        cond = _lane_guard(src, s)
        if cond is None:
            continue
        rest = stmts[i + 1 :]
        k = next((j for j, t in enumerate(rest) if _full_collective(src, t)), None)
        if k is None or not all(_uniform_exits(src, body, t) for t in rest[:k]):
            return []
        return [
            edit.replace(n, f"threadIdx.x / {WARP} * {WARP}")
            for n in S.walk(cond)
            if n.type == "field_expression" and S.squash(src.text_of(n)) == "threadIdx.x"
        ]
    return []


def _lane_guard(src: CudaSource, s: ts.Node) -> ts.Node | None:
    """The condition of `if (threadIdx.x >= E) return;` (E free of thread indices), or None."""
    if s.type != "if_statement" or s.child_by_field_name("alternative") is not None:
        return None
    cond, then = s.child_by_field_name("condition"), s.child_by_field_name("consequence")
    if cond is None or then is None:
        return None
    inner = then.named_children if then.type == "compound_statement" else [then]
    if len(inner) != 1 or S.squash(src.text_of(inner[0])) != "return;":
        return None
    m = _GUARD.match(S.squash(src.text_of(cond)))
    if m is None or "threadIdx" in m.group(1) or "(" in m.group(1):
        return None
    return cond


def _full_collective(src: CudaSource, s: ts.Node) -> bool:
    """A top-level statement that itself runs a full-mask collective, under no branch or loop."""
    if s.type not in ("expression_statement", "declaration"):
        return False
    return any(
        n.type == "call_expression"
        and _COLLECTIVE.match(S.squash(src.text_of(n)))
        and not any(a.type in _BRANCHES for a in S.ancestors(n, s))
        for n in S.walk(s)
    )


def _uniform_exits(src: CudaSource, body: ts.Node, s: ts.Node) -> bool:
    """Every return (or goto) in `s` is taken by whole warps: each enclosing condition reads the
    thread index only as the warp's index, through locals too; none sits in a loop."""
    for n in S.walk(s):
        if n.type not in ("return_statement", "goto_statement"):
            continue
        for a in [n, *S.ancestors(n, body)]:
            if a.type in ("for_statement", "while_statement", "do_statement", "switch_statement"):
                return False
            if a.type == "if_statement" and not _warp_uniform(src, body, a.child_by_field_name("condition")):
                return False
    return True


def _warp_uniform(src: CudaSource, body: ts.Node, cond: ts.Node | None, depth: int = 0) -> bool:
    """`cond` reads threadIdx.x only as the warp's index, through never-written locals too."""
    if cond is None or depth > 8:
        return False
    text = _WARP_INDEX.sub("", S.squash(src.text_of(cond)))
    if "threadIdx" in text or "laneid" in text:
        return False
    written = S.assigned_in(body)
    for name in {n.text.decode() for n in S.walk(cond) if n.type == "identifier" and n.text}:
        if name in written:
            return False
        init = _local_init(body, name)
        if init is not None and not _warp_uniform(src, body, init, depth + 1):
            return False
    return True


def _local_init(body: ts.Node, name: str) -> ts.Node | None:
    """The initializer of the local `name` declared in `body` (None for parameters and globals)."""
    for n in S.walk(body):
        if n.type == "init_declarator" and S.declarator_ident(n) == name:
            return n.child_by_field_name("value")
    return None
