"""Block swizzle: the order in which blocks take output tiles is permuted so that blocks running
at the same time share operand tiles in L2 (cuda_hgemm's `BLOCK_STRIDE` swizzle): the grid's z
index folds into the column index, `(blockIdx.z * gridDim.x + blockIdx.x)`, and every other z
slice walks the rows backwards, `(blockIdx.z % 2) ? (gridDim.y - blockIdx.y - 1) * F : blockIdx.y * F`.

Backward: the tile a block takes is the plain one: the conditional becomes its forward branch
and, when z is read only in the fold, the fold becomes `blockIdx.x` and the launch grid
`dim3(X, Y, Z)` becomes `dim3(X * Z, Y)`. Both are bijections of the blocks onto the same tiles
(a reversal of [0, gridDim.y) per z slice; z * X + x over x < X, z < Z onto [0, X * Z)), so a
kernel whose blocks never communicate computes the same output.

Read on structure: the site is a conditional on the parity of one block index whose two branches
differ only by `blockIdx.Y` against `(gridDim.Y - blockIdx.Y - 1)`. No mechanical forward step
(the stride is a tuning choice): the skill it records is for an LLM provider.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import tree_sitter as ts

from klineage.deopt import _threads as T
from klineage.deopt.base import Operator, Precondition, Refused, Site
from klineage.source import edit
from klineage.source.constructs import LaunchSite
from klineage.source.model import CudaSource
from klineage.source.syntax import squash, unparen_text, walk

_PARITY = re.compile(r"\(?blockIdx\.([xyz])(?:%2|&1)\)?(?:!=0|==1)?")
_COMMUNICATES = r"atomic\w*|__threadfence\w*|\w*grid\w*\.sync|this_grid"


@dataclass(frozen=True)
class _Swizzle:
    cond: ts.Node  # the conditional expression
    plain: ts.Node  # its branch with the plain row order
    parity: str  # the axis whose parity flips the order
    axis: str  # the axis walked backwards
    fold: ts.Node | None  # `(blockIdx.z * gridDim.x + blockIdx.x)` when the parity axis folds in


def _reversed(text: str, axis: str) -> str:
    return text.replace(f"blockIdx.{axis}", f"(gridDim.{axis}-blockIdx.{axis}-1)")


def _bare(text: str) -> str:
    return squash(text).replace("(", "").replace(")", "")


def _fold(src: CudaSource, fn: ts.Node, z: str) -> ts.Node | None:
    """The fold `(blockIdx.z * gridDim.x + blockIdx.x)` of axis z into x, when there is one."""
    for n in walk(fn):
        if n.type == "binary_expression" and re.fullmatch(
            rf"blockIdx\.{z}\*gridDim\.x\+blockIdx\.x|blockIdx\.x\+blockIdx\.{z}\*gridDim\.x",
            squash(src.text_of(n)),
        ):
            return n
    return None


def _read(src: CudaSource, cond: ts.Node) -> _Swizzle | None:
    c, a, b = (cond.child_by_field_name(f) for f in ("condition", "consequence", "alternative"))
    if c is None or a is None or b is None:
        return None
    m = _PARITY.fullmatch(squash(src.text_of(c)))
    if m is None:
        return None
    ta, tb = unparen_text(squash(src.text_of(a))), unparen_text(squash(src.text_of(b)))
    for axis in "xyz":
        if axis == m.group(1) or f"blockIdx.{axis}" not in tb + ta:
            continue
        if _bare(_reversed(tb, axis)) == _bare(ta):
            plain = b
        elif _bare(_reversed(ta, axis)) == _bare(tb):
            plain = a
        else:
            continue
        fn = T.fn_node_of(cond)
        fold = _fold(src, fn, m.group(1)) if fn is not None and m.group(1) == "z" else None
        return _Swizzle(cond, plain, m.group(1), axis, fold)
    return None


def _reads(src: CudaSource, fn: ts.Node, name: str, inside: list[ts.Node]) -> int:
    """How many times `name` (`blockIdx.y`) is read in `fn` outside the nodes `inside`."""
    return sum(
        1
        for n in walk(fn.child_by_field_name("body"))
        if n.type == "field_expression"
        and squash(src.text_of(n)) == name
        and not any(x.start_byte <= n.start_byte < x.end_byte for x in inside)
    )


def _dim3_args(src: CudaSource, ls: LaunchSite) -> tuple[ts.Node, list[str]] | None:
    """(the node holding the grid's dim3 arguments, the arguments) of a launch."""
    cfg = T.config_nodes(src, ls)
    if not cfg:
        return None
    grid = cfg[0]
    if grid.type == "identifier":
        launcher = T.enclosing_launcher(src, ls)
        if launcher is None:
            return None
        name = src.text_of(grid)
        decl = next(
            (
                n
                for n in walk(launcher)
                if n.type == "declaration"
                and src.text_of(n.child_by_field_name("type")) == "dim3"
                and T.decl_name(n) == name
            ),
            None,
        )
        if decl is None:
            return None
        grid = decl.child_by_field_name("declarator")
    lists = [n for n in walk(grid) if n.type in ("parameter_list", "argument_list")]
    if not lists:
        return None
    args = [src.text_of(x) for x in lists[0].named_children if x.type != "comment"]
    return lists[0], args


class BlockSwizzle(Operator):
    name = "block_swizzle"
    category = "tuning"
    intent = (
        "Swizzle the order in which blocks take output tiles (fold z into the columns, walk the "
        "rows backwards on odd z slices) so that co-resident blocks share operand tiles in L2"
    )

    def find(self, src: CudaSource) -> list[Site]:
        out = []
        for k in src.kernels:
            for n in walk(src.node_for(k)):
                if n.type == "conditional_expression" and (s := _read(src, n)) is not None:
                    folded = " and folds z into the columns" if s.fold is not None else ""
                    out.append(
                        self.site(
                            src,
                            n,
                            f"block swizzle in {k.name}: odd blockIdx.{s.parity} slices walk "
                            f"blockIdx.{s.axis} backwards{folded}",
                            kernel=k.name,
                        )
                    )
        return out

    def _swizzle(self, src: CudaSource, site: Site) -> tuple[ts.Node, _Swizzle]:
        cond = next(
            (
                n
                for n in src.nodes_of_type("conditional_expression")
                if (n.start_byte, n.end_byte) == (site.start, site.end)
            ),
            None,
        )
        s = _read(src, cond) if cond is not None else None
        fn = T.fn_node_of(cond) if cond is not None else None
        if s is None or fn is None:
            raise Refused(f"{self.name}: no block swizzle at the site")
        return fn, s

    def removal_preconditions(self, src: CudaSource, site: Site) -> list[Precondition]:
        try:
            fn, s = self._swizzle(src, site)
        except Refused as e:
            return [Precondition("swizzle_read", False, str(e), "Layout")]
        body = fn.child_by_field_name("body")
        quiet = not T.calls_named(body, _COMMUNICATES)
        once = all(_reads(src, fn, f"{v}.{s.axis}", [s.cond]) == 0 for v in ("blockIdx", "gridDim"))
        facts = [
            Precondition(
                "blocks_independent",
                quiet,
                "no atomics, fences or grid synchronization: which block takes which tile does not matter",
                "Layout",
            ),
            Precondition(
                "reversed_axis_read_once",
                once,
                f"blockIdx.{s.axis} and gridDim.{s.axis} are read only in the swizzle",
                "Layout",
            ),
        ]
        if s.fold is not None:
            facts.append(self._fold_fact(src, fn, s, site.details["kernel"]))
        return facts

    def _fold_fact(self, src: CudaSource, fn: ts.Node, s: _Swizzle, kernel: str) -> Precondition:
        inside = [s.cond, s.fold] if s.fold is not None else [s.cond]
        alone = all(_reads(src, fn, n, inside) == 0 for n in ("blockIdx.z", "gridDim.x", "gridDim.z"))
        launches = T.launches_of(src, kernel)
        grids = [_dim3_args(src, ls) for ls in launches]
        three = bool(launches) and all(g is not None and len(g[1]) == 3 for g in grids)
        return Precondition(
            "fold_only_z",
            alone and three,
            "blockIdx.z, gridDim.x and gridDim.z are read only in the swizzle and the fold, and every "
            "launch's grid is a dim3 of three sizes",
            "Layout",
        )

    def _remove(self, src: CudaSource, site: Site) -> CudaSource:
        fn, s = self._swizzle(src, site)
        edits = [edit.replace(s.cond, src.text_of(s.plain))]
        if s.fold is not None:
            edits.append(edit.replace(s.fold, "blockIdx.x"))
            for ls in T.launches_of(src, site.details["kernel"]):
                got = _dim3_args(src, ls)
                if got is None or len(got[1]) != 3:
                    raise Refused(f"{self.name}: a launch's grid is not a dim3 of three sizes")
                node, (x, y, z) = got
                edits.append(edit.replace(node, f"({T.paren(x)} * {T.paren(z)}, {y})"))
        return edit.apply_edits(src, edits)
