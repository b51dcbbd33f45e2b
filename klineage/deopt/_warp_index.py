"""A warp's index within its block, and a merge of lane partials over shuffles, as a warp-per-row
kernel writes them (llm.c's online softmax: `warpId = threadIdx.x / warpSize`, a guard on the
warp's first lane, a loop merging (max, sum) pairs with `__shfl_down_sync`).

The warp-per-row removal reads the row through warp-index locals and maps every other read of the
warp's index to the index the row's warp had: with one thread per row and the block size kept,
row r was handled by warp r % (blockDim.x / 32) of its block.
"""

from __future__ import annotations

import re

import tree_sitter as ts

from klineage.deopt import _threads as T
from klineage.source import syntax as S
from klineage.source.model import CudaSource

WARP = 32
_WARP_INDEX = re.compile(r"\(?threadIdx\.x\)?(?:/\(?(\w+)\)?|>>5)")
_FULL = r"(?:0x[fF]{8}[uU]?|~0[uU]?|-1)"
#: calls a merge of lane partials may make besides its shuffles: math on registers
_MATH = re.compile(
    r"(?:__)?(?:expf?|exp2f?|logf?|fmaxf?|fminf?|maxf?|minf?|max|min|fabsf?|sqrtf?|rsqrtf?|fmaf?)"
)


def warp_index_nodes(src: CudaSource, body: ts.Node) -> list[ts.Node]:
    """The expressions `threadIdx.x / 32` (or `/ warpSize`, `>> 5`) in `body`."""
    consts = T.file_constants(src)
    out = []
    for n in T.walk(body):
        if n.type != "binary_expression":
            continue
        m = _WARP_INDEX.fullmatch(T.squash(src.text_of(n)))
        if m is not None and (m.group(1) is None or T.eval_int(m.group(1), consts) == WARP):
            out.append(n)
    return out


_W = r"(?:/\(?(?:32|warpSize)\)?|>>5)"
_ROW_OF_WARPS = re.compile(
    rf"\(?blockIdx\.x\*\(?blockDim\.x{_W}\)?\)?\+\(?threadIdx\.x{_W}\)?"
    rf"|\(?\(blockIdx\.x\*blockDim\.x\+threadIdx\.x\){_W}\)?"
)


def rows_by_block_warps(row_text: str) -> bool:
    """The row (locals spelled out, squashed) is the block's first row plus the warp's index, a
    block holding blockDim.x / 32 rows: then the warp's index is the row modulo that count."""
    return _ROW_OF_WARPS.fullmatch(row_text) is not None


def row_warp_index(row: str) -> str:
    """What the warp's index within its block was, for the thread that now owns row `row`."""
    return f"(({row}) % (blockDim.x / {WARP}))"


def warp_locals(src: CudaSource, body: ts.Node) -> dict[str, ts.Node]:
    """name -> initializer of the never-written locals declared once as a warp's index."""
    written = T.assigned_in(body)
    idx = {(n.start_byte, n.end_byte) for n in warp_index_nodes(src, body)}
    seen: dict[str, list[ts.Node | None]] = {}
    for d in T.walk(body):
        if d.type == "init_declarator" and (name := T.declarator_ident(d)):
            seen.setdefault(name, []).append(d.child_by_field_name("value"))
    out = {}
    for name, vals in seen.items():
        v = S.unparenthesized(vals[0]) if len(vals) == 1 and vals[0] is not None else None
        if v is not None and name not in written and (v.start_byte, v.end_byte) in idx:
            out[name] = v
    return out


def pair_merge_loop(src: CudaSource, loop: ts.Node) -> bool:
    """A loop over shuffle offsets that only merges lane partials: its body reads other lanes only
    through full-mask `__shfl_down_sync` / `__shfl_xor_sync` at the loop's offset, synchronizes
    only the warp, calls only math, and writes only plain locals; no memory, no exits."""
    off = _offset_var(src, loop)
    body = loop.child_by_field_name("body")
    if off is None or body is None:
        return False
    shuffles = 0
    for n in T.walk(body):
        if n.type in ("return_statement", "break_statement", "continue_statement", "goto_statement"):
            return False
        if n.type in ("subscript_expression", "pointer_expression", "field_expression"):
            return False
        if n.type == "assignment_expression" and n.child_by_field_name("left").type != "identifier":
            return False
        if n.type != "call_expression":
            continue
        t = T.squash(src.text_of(n))
        if re.fullmatch(rf"__shfl_(?:down|xor)_sync\({_FULL},\w+,{re.escape(off)}\)", t):
            shuffles += 1
        elif t != "__syncwarp()" and not _MATH.fullmatch(T.call_name(n)):
            return False
    return shuffles > 0


def lane0_broadcast(src: CudaSource, stmt: ts.Node) -> bool:
    """`v = __shfl_sync(full mask, v, 0);`: every lane takes lane 0's merged value."""
    t = T.squash(src.text_of(stmt))
    return re.fullmatch(rf"(\w+)=__shfl_sync\({_FULL},\1,0\);", t) is not None


def _offset_var(src: CudaSource, loop: ts.Node) -> str | None:
    """The variable of `for (int o = A; o > 0 | o < B; o >>= 1 | o /= 2 | o <<= 1 | o *= 2)`."""
    if loop.type != "for_statement":
        return None
    init, upd = loop.child_by_field_name("initializer"), loop.child_by_field_name("update")
    var = T.decl_name(init) if init is not None and init.type == "declaration" else None
    if var is None or upd is None:
        return None
    v = re.escape(var)
    ok = re.fullmatch(rf"{v}(?:>>=1|/=2|<<=1|\*=2|={v}(?:/2|>>1|\*2|<<1))", T.squash(src.text_of(upd)))
    return var if ok else None
