"""Cooperative-groups warp tiles spelled with the built-ins: in a kernel launched with 1-D blocks,
a `thread_block_tile<32>` partitioned from `this_thread_block()` is the warp, so its members read
as the thread indices and warp intrinsics they stand for:

- `w.thread_rank()` -> a `lane` declared `threadIdx.x % 32` after the tile;
- `w.size()` / `w.num_threads()` -> `32`;
- `w.meta_group_rank()` -> `(threadIdx.x / 32)`, `w.meta_group_size()` -> `((blockDim.x + 31) / 32)`;
- `w.shfl(v, l)`, `w.shfl_down/up/xor(v, d)` -> `__shfl_sync(0xffffffffu, v, l)` and kin;
- `w.sync()` -> `__syncwarp()`; the block group's `thread_rank()` / `size()` -> `threadIdx.x` /
  `blockDim.x`.

The row operators (warp_per_row, block_per_row) then read the lane, the warp's row and the
reductions as they read hand-written warps. `cg::reduce(w, v, op)` stays: cg_reduce is the step
that spells it out. Left alone: a kernel that reads a y or z thread index or block size, or
whose launches give a `dim3` or a name the launcher declares as one.
"""

from __future__ import annotations

import re

import tree_sitter as ts

from klineage.source import edit
from klineage.source import syntax as S
from klineage.source.canon.base import Rule
from klineage.source.constructs import Function
from klineage.source.edit import Edit
from klineage.source.model import CudaSource

_NS = r"(?:cg|cooperative_groups|::cooperative_groups)::"
_BLOCK_DECL = re.compile(rf"^(?:const)?(?:{_NS}thread_block|auto)(\w+)={_NS}this_thread_block\(\);$")
_TILE_DECL = re.compile(
    rf"^(?:const)?(?:{_NS}thread_block_tile<32>|auto)(\w+)={_NS}tiled_partition<32>\((\w+|{_NS}this_thread_block\(\))\);$"
)
_MASK = "0xffffffffu"
_TILE_MEMBERS = {
    "size": "32",
    "num_threads": "32",
    "meta_group_rank": "(threadIdx.x / 32)",
    "meta_group_size": "((blockDim.x + 31) / 32)",
    "sync": "__syncwarp()",
}
_SHUFFLES = {
    "shfl": "__shfl_sync",
    "shfl_down": "__shfl_down_sync",
    "shfl_up": "__shfl_up_sync",
    "shfl_xor": "__shfl_xor_sync",
}
_BLOCK_MEMBERS = {"thread_rank": "threadIdx.x", "size": "blockDim.x", "num_threads": "blockDim.x"}


class CgTileSpelling(Rule):
    name = "cg_tile_spelling"
    summary = "a cooperative-groups warp tile's members (thread_rank, meta_group_rank, shfl_*) are written with built-ins"

    def edits(self, src: CudaSource) -> list[Edit]:
        out: list[Edit] = []
        for k in src.kernels:
            if _one_dimensional(src, k):
                out += _kernel(src, src.node_for(k))
        return out


def _kernel(src: CudaSource, fn: ts.Node) -> list[Edit]:
    body = fn.child_by_field_name("body")
    if body is None:
        return []
    blocks: set[str] = set()
    tiles: dict[str, ts.Node] = {}
    for d in S.walk(body):  # the tile's `<32>` can parse as a comparison: any statement is read
        if d.type not in ("declaration", "expression_statement"):
            continue
        t = S.squash(src.text_of(d))
        if m := _BLOCK_DECL.match(t):
            blocks.add(m.group(1))
        elif (m := _TILE_DECL.match(t)) and (
            m.group(2) in blocks or m.group(2).endswith("this_thread_block()")
        ):
            tiles[m.group(1)] = d
    if not tiles:
        return []
    lane = next(n for n in ("lane", "kl_lane", "kl_lane_") if n not in S.local_decls(fn))
    out: list[Edit] = []
    ranked: set[str] = set()
    for call in src.nodes_of_type("call_expression"):
        if not fn.start_byte <= call.start_byte < fn.end_byte:
            continue
        f = call.child_by_field_name("function")
        if f is None or f.type != "field_expression":
            continue
        obj, member = f.child_by_field_name("argument"), f.child_by_field_name("field")
        if obj is None or member is None or obj.type != "identifier":
            continue
        who, what = src.text_of(obj), src.text_of(member)
        args = [src.text_of(a) for a in S.call_args(call)]
        new = _rewrite(who in tiles, who in blocks, what, args, lane)
        if new is None:
            continue
        if who in tiles and what == "thread_rank":
            ranked.add(who)
        out.append(edit.replace(call, new))
    for who in ranked:
        decl = tiles[who]
        indent = " " * decl.start_point[1]
        out.append(Edit(decl.end_byte, decl.end_byte, f"\n{indent}const int {lane} = threadIdx.x % 32;"))
        break  # every 32-tile of the block has the same lanes: one declaration serves them all
    return out


def _rewrite(tile: bool, block: bool, member: str, args: list[str], lane: str) -> str | None:
    if tile and member == "thread_rank" and not args:
        return lane
    if tile and member in _TILE_MEMBERS and not args:
        return _TILE_MEMBERS[member]
    if tile and member in _SHUFFLES and len(args) == 2:
        return f"{_SHUFFLES[member]}({_MASK}, {args[0]}, {args[1]})"
    if block and member in _BLOCK_MEMBERS and not args:
        return _BLOCK_MEMBERS[member]
    return None


def _one_dimensional(src: CudaSource, k: Function) -> bool:
    """The kernel reads only x thread indices and every launch gives a 1-D block (a number, not a
    `dim3`)."""
    if re.search(r"\b(?:threadIdx|blockDim)\.[yz]\b", src.text_of(k)):
        return False
    launches = [ls for ls in src.launch_sites if ls.name == k.name]
    if not launches:
        return False
    for ls in launches:
        if len(ls.config) < 2 or "dim3" in ls.config[1] or "{" in ls.config[1]:
            return False
        name = ls.config[1].strip()
        if name.isidentifier():
            node = src.node_for(ls)
            launcher = next((f for f in src.functions if f.start <= node.start_byte < f.end), None)
            text = src.text_of(launcher) if launcher is not None else ""
            if re.search(rf"\bdim3\s+(?:const\s+)?{re.escape(name)}\b", text):
                return False
    return True
