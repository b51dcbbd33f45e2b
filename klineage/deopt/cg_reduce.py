"""Cooperative-groups reductions: `cg::reduce(tile, v, cg::plus<float>())` and `tile.shfl_down` /
`tile.shfl_xor` loops over a `thread_block_tile<N>`.

What the expert gains over hand-written shuffles: one call that the compiler lowers to the best
instruction sequence for the target (`redux.sync` for 32-bit integers on sm_80+, butterflies
otherwise), with the tile's mask and width handled for sub-warp tiles. The backward step therefore
lowers the CG reduction to the *plain warp-shuffle loop* it stands for (`__shfl_xor_sync` with the
tile's mask and offsets N/2..1), not all the way to shared memory: that further step is
`warp_shuffle_reduce`'s, so the lineage records the two techniques separately.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import tree_sitter as ts

from klineage.deopt import _threads as T
from klineage.deopt import warp_shuffle_reduce as W
from klineage.deopt.base import Operator, Precondition, Refused, Site
from klineage.source import edit
from klineage.source import nodes as N
from klineage.source.model import CudaSource

_REDUCE = r"(?:cg|cooperative_groups)::reduce|reduce"
_OPS = {
    "plus": ("sum", "{v} += {s};"),
    "greater": ("max", "{v} = max({v}, {s});"),
    "less": ("min", "{v} = min({v}, {s});"),
    "bit_and": ("and", "{v} &= {s};"),
    "bit_or": ("or", "{v} |= {s};"),
    "bit_xor": ("xor", "{v} ^= {s};"),
}
_CG_OF = {
    "{a} + {b}": "plus",
    "max({a}, {b})": "greater",
    "fmaxf({a}, {b})": "greater",
    "min({a}, {b})": "less",
    "fminf({a}, {b})": "less",
}
_INCLUDES = "#include <cooperative_groups.h>\n#include <cooperative_groups/reduce.h>\n"


@dataclass(frozen=True)
class _CgSite:
    node: ts.Node  # the reduce call, or the loop
    form: str  # reduce | shfl_loop
    tile_var: str
    tile: int | None
    op: str  # plus / greater / ... ('' when unknown)
    value_type: str | None
    value: str


def _tile_size(src: CudaSource, fn: ts.Node, var: str) -> int | None:
    """N of `thread_block_tile<N> var = ...` or `auto var = tiled_partition<N>(...)` in `fn` (or a
    parameter). Read from the text: the grammar parses `cg::thread_block_tile<32> t = ...` as a
    comparison."""
    consts = T.file_constants(src)
    inline = re.search(r"tiled_partition<([^<>]+)>", var)
    if inline:
        return T.eval_int(inline.group(1), consts)
    text = src.text_of(fn)
    v = re.escape(var)
    pats = (
        rf"thread_block_tile\s*<\s*([^,<>]+?)\s*(?:,[^<>]*)?>\s*&?\s*{v}\b",
        rf"\b{v}\s*=\s*(?:cg::|cooperative_groups::)?tiled_partition\s*<\s*([^,<>]+?)\s*>",
    )
    for pat in pats:
        m = re.search(pat, text)
        if m:
            return T.eval_int(m.group(1), consts)
    return None


def _reduce_site(src: CudaSource, fn: ts.Node, call: ts.Node) -> _CgSite | None:
    name = T.call_name(call)
    if name == "reduce" and "cooperative_groups" not in src.text:
        return None
    args = T.call_args(call)
    if len(args) != 3:
        return None
    tile_var = T.squash(src.text_of(args[0]))
    m = re.fullmatch(r"(?:cg::|cooperative_groups::)?(\w+)(?:<([^>]*)>)?\(\)", T.squash(src.text_of(args[2])))
    op = m.group(1) if m and m.group(1) in _OPS else ""
    vtype = m.group(2) if m and m.group(2) else None
    value = src.text_of(args[1])
    if vtype is None and re.fullmatch(r"\w+", value.strip()):
        vtype = W.value_type(src, fn, value.strip())
    return _CgSite(call, "reduce", tile_var, _tile_size(src, fn, tile_var), op, vtype, value)


def _shfl_loop_site(src: CudaSource, fn: ts.Node, loop: ts.Node) -> _CgSite | None:
    body = loop.child_by_field_name("body")
    if body is None:
        return None
    meth = [
        c
        for c in T.walk(body)
        if c.type == "call_expression" and re.fullmatch(r"\w+\.shfl_(?:down|xor)", T.call_name(c))
    ]
    if not meth:
        return None
    tile_var = T.call_name(meth[0]).split(".")[0]
    return _CgSite(loop, "shfl_loop", tile_var, _tile_size(src, fn, tile_var), "", None, "")


def _sites(src: CudaSource) -> list[tuple[ts.Node, _CgSite]]:
    out = []
    for f in src.functions:
        if f.kind not in ("kernel", "device"):
            continue
        fn = src.node_for(f)
        for call in T.calls_named(fn, _REDUCE):
            s = _reduce_site(src, fn, call)
            if s is not None:
                out.append((fn, s))
        for loop in T.walk(fn):
            if loop.type == "for_statement":
                s = _shfl_loop_site(src, fn, loop)
                if s is not None:
                    out.append((fn, s))
    return sorted(out, key=lambda p: p[1].node.start_byte)


def _mask(tile: int) -> str:
    if tile == 32:
        return "0xffffffffu"
    return f"({hex((1 << tile) - 1)}u << ((threadIdx.x & 31) & ~{tile - 1}))"


def _helper_name(op: str, tile: int) -> str:
    return f"shfl_{_OPS[op][0]}_tile{tile}"


def _helper_text(op: str, tile: int) -> str:
    step = _OPS[op][1].format(v="v", s=f"__shfl_xor_sync({_mask(tile)}, v, off)")
    return (
        f"// Butterfly {_OPS[op][0]} over a tile of {tile} lanes: every lane ends with the tile's result.\n"
        f"template <typename T>\n__device__ __forceinline__ T {_helper_name(op, tile)}(T v) {{\n"
        f"#pragma unroll\n    for (int off = {tile // 2}; off > 0; off >>= 1) {step}\n    return v;\n}}\n\n"
    )


class CgReduce(Operator):
    name = "cg_reduce"
    category = "specialized_instruction"
    intent = (
        "Express a warp/tile reduction as cooperative_groups::reduce over a thread_block_tile, letting the "
        "compiler pick the instruction sequence (redux.sync for 32-bit integers, butterflies otherwise)."
    )
    mechanical_apply = True

    def find(self, src: CudaSource) -> list[Site]:
        sites = []
        for fn, s in _sites(src):
            what = f"cg::reduce<{s.op or '?'}>" if s.form == "reduce" else f"{s.tile_var}.shfl loop"
            sites.append(
                self.site(
                    src,
                    s.node,
                    f"{what} over a tile of {s.tile or '?'} in {N.func_name(fn)}",
                    form=s.form,
                    tile=str(s.tile or "?"),
                    op=s.op or "?",
                    function=N.func_name(fn),
                )
            )
        return sites

    def _get(self, src: CudaSource, site: Site) -> tuple[ts.Node, _CgSite]:
        node = src.node_at(site.anchor)
        for fn, s in _sites(src):
            if s.node == node:
                return fn, s
        raise Refused(f"{self.name}: no cooperative-groups reduction at {site.anchor}")

    def _facts(self, src: CudaSource, s: _CgSite) -> list[Precondition]:
        ok_tile = s.tile is not None and T.is_pow2(s.tile) and s.tile <= 32
        facts = [
            Precondition(
                "static_tile",
                ok_tile,
                f"tile {s.tile_var} has a compile-time size of {s.tile} lanes"
                if ok_tile
                else f"size of tile {s.tile_var} is not a compile-time power of two <= 32",
                "Hardware",
            )
        ]
        if s.form == "reduce":
            facts.append(
                Precondition(
                    "known_operator",
                    bool(s.op),
                    f"cg::{s.op} (associative and commutative)"
                    if s.op
                    else "the reduction operator is not a cg:: functor",
                    "Data types",
                )
            )
            facts.append(
                Precondition(
                    "value_type_known",
                    s.value_type is not None,
                    f"values of type {s.value_type}" if s.value_type else "the value's type is not known",
                    "Data types",
                )
            )
        return facts

    def removal_preconditions(self, src: CudaSource, site: Site) -> list[Precondition]:
        _, s = self._get(src, site)
        return self._facts(src, s)

    def preconditions(self, src: CudaSource, site: Site) -> list[Precondition]:
        if site.details.get("forward") == "1":
            return [
                Precondition("whole_warp_reduction", True, "offsets 16..1 over a full-mask warp", "Hardware"),
                Precondition(
                    "known_operator",
                    site.details.get("op", "") in _OPS,
                    f"combiner maps to cg::{site.details.get('op')}",
                    "Data types",
                ),
            ]
        _, s = self._get(src, site)
        return self._facts(src, s)

    def _remove(self, src: CudaSource, site: Site) -> CudaSource:
        fn, s = self._get(src, site)
        assert s.tile is not None
        if s.form == "shfl_loop":
            body = s.node
            text = src.text_of(body)
            mask = _mask(s.tile)
            v = re.escape(s.tile_var)
            text = re.sub(
                rf"\b{v}\s*\.\s*shfl_(down|xor)\s*\(", lambda m: f"__shfl_{m.group(1)}_sync({mask}, ", text
            )
            text = re.sub(rf"\b{v}\s*\.\s*(?:size|num_threads)\s*\(\s*\)", str(s.tile), text)
            if s.tile < 32:
                text = re.sub(r"(__shfl_(?:down)_sync\((?:[^()]|\([^()]*\))*)\)", rf"\1, {s.tile})", text)
            return edit.apply_edits(src, [edit.replace(body, text)])
        helper = _helper_name(s.op, s.tile)
        edits = [edit.replace(s.node, f"{helper}<{s.value_type}>({s.value})")]
        if f"{helper}(" not in src.text and f"{helper}<" not in src.text:
            top = fn.parent if fn.parent is not None and fn.parent.type == "template_declaration" else fn
            edits.append(edit.insert_before(top, _helper_text(s.op, s.tile)))
        return edit.apply_edits(src, edits)

    # ---- forward: a full-warp shuffle loop -> cg::reduce ----------------------------------------
    def find_forward(self, src: CudaSource) -> list[Site]:
        sites = []
        for fn, r in W.reductions(src):
            op = _CG_OF.get(r.combiner, "")
            if r.form != "loop" or not op or r.start != 16:
                continue
            sites.append(
                self.site(
                    src,
                    r.first,
                    f"shuffle loop over {r.var} in {N.func_name(fn)} could be cg::reduce",
                    var=r.var,
                    op=op,
                    forward="1",
                )
            )
        return sites

    def _apply(self, src: CudaSource, site: Site) -> CudaSource:
        node = src.node_at(site.anchor)
        for fn, r in W.reductions(src):
            if r.first != node:
                continue
            facts = [
                f
                for f in W.WarpShuffleReduce()._facts(src, fn, r)
                if f.name in ("full_warp_mask", "warp_converged")
            ]
            self._check(facts)
            ty = W.value_type(src, fn, r.var) or "float"
            op = site.details["op"]
            call = (
                f"{r.var} = cg::reduce(cg::tiled_partition<32>(cg::this_thread_block()), {r.var}, "
                f"cg::{op}<{ty}>());"
            )
            start = r.first.start_byte
            pragma = src.pragma_of(r.first)
            if pragma is not None:
                start = src.line_start(pragma.line)
                call = edit.indent_of(src, r.first) + call
            edits = [edit.Edit(start, r.last.end_byte, call)]
            header = ""
            if "cooperative_groups/reduce.h" not in src.text:
                header += (
                    _INCLUDES
                    if "<cooperative_groups.h>" not in src.text
                    else "#include <cooperative_groups/reduce.h>\n"
                )
            if not re.search(r"namespace\s+cg\s*=\s*cooperative_groups", src.text):
                header += "namespace cg = cooperative_groups;\n"
            if header:
                incs = list(re.finditer(rb"^#include[^\n]*\n", src.text_bytes, re.M))
                pos = incs[-1].end() if incs else 0
                edits.append(edit.Edit(pos, pos, header))
            return edit.apply_edits(src, edits)
        raise Refused(f"{self.name}: no shuffle loop at {site.anchor}")
