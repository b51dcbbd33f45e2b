"""Register blocking: each thread accumulates a TM x TN micro-tile of outputs in registers
(`float acc[TM][TN]`, unrolled loops `acc[i][j] += a[i] * b[j]`), reusing every operand it loads
from shared memory TM (or TN) times.

Idiom-specific (the GEMM micro-tile written in terms of named compile-time sizes): the block tile
BM x BN is split among (BM / TM) * (BN / TN) threads. The backward step sets the micro-tile to 1 x 1
and shrinks the block tile to BM / TM x BN / TN, so every thread computes one output and the block
keeps its thread count; the launcher's grid, written in BM and BN, covers the output with more,
smaller blocks. Sizes are edited where they are defined (constexpr, #define, or the constant a
launch passes as a template argument); literals at the launch are refused.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import tree_sitter as ts

from klineage.deopt import _threads as T
from klineage.deopt._asserts import failing_asserts
from klineage.deopt.base import Operator, Precondition, Refused, Site
from klineage.source import edit
from klineage.source.constructs import Function
from klineage.source.model import CudaSource
from klineage.source.syntax import IntConstant, int_constants

DEFAULT_FACTOR = 4
#: how many times the K tile may double for the file's static_asserts to hold
_MAX_K_DOUBLINGS = 4


@dataclass(frozen=True)
class _Acc:
    decl: ts.Node
    name: str
    dims: tuple[str, ...]  # the array's dimension texts (TM, TN) as written


def accumulators(src: CudaSource, fn: ts.Node, one_d: bool = False) -> list[_Acc]:
    """Local arrays updated by `acc[i][j] += x * y` (or fmaf) inside loops. With `one_d`, a 1-D
    `acc[TM]` (1-D thread tiling: a column of TM outputs a thread) reads as a TM x 1 micro-tile."""
    out = []
    for d in T.walk(fn):
        if d.type != "declaration" or "__shared__" in src.text_of(d):
            continue
        for dd in d.children_by_field_name("declarator"):
            target = dd.child_by_field_name("declarator") if dd.type == "init_declarator" else dd
            dims = []
            while target is not None and target.type == "array_declarator":
                size = target.child_by_field_name("size")
                dims.append(T.squash(src.text_of(size)) if size is not None else "")
                target = target.child_by_field_name("declarator")
            if target is None or target.type != "identifier" or not dims:
                continue
            name = src.text_of(target)
            dims = dims[::-1]
            if len(dims) == 1 and "*" in dims[0]:
                dims = dims[0].split("*")
            elif len(dims) == 1 and one_d and dims[0]:
                dims = [dims[0], "1"]
            if len(dims) != 2:
                continue
            upd = re.compile(rf"{re.escape(name)}(?:\[\w+\]\[\w+\]|\[[^\]]*\])(?:\+=[^;]*\*|=fmaf\()")
            if upd.search(T.squash(src.text_of(fn))):
                out.append(_Acc(d, name, tuple(dims)))
    return out


class RegisterBlocking(Operator):
    name = "register_blocking"
    category = "tiling"
    intent = (
        "Block registers: each thread accumulates a TM x TN micro-tile (acc[TM][TN]) so every operand loaded "
        "from shared memory is reused TM or TN times; the block tile BM x BN is split among "
        "(BM/TM)*(BN/TN) threads."
    )
    mechanical_apply = True

    def find(self, src: CudaSource) -> list[Site]:
        return self._sites(src, forward=False)

    def find_forward(self, src: CudaSource) -> list[Site]:
        return self._sites(src, forward=True)

    def _sites(self, src: CudaSource, forward: bool) -> list[Site]:
        sites = []
        for k in src.kernels:
            fn = src.node_for(k)
            # backward only: a 1-D tile is removed to one output, never grown (forward sites unchanged)
            for acc in accumulators(src, fn, one_d=not forward):
                vals = [self._value(src, k, d) for d in acc.dims]
                if not self._selects(vals, forward):
                    continue
                sites.append(
                    self.site(
                        src,
                        acc.decl,
                        f"{acc.name}[{']['.join(acc.dims)}] micro-tile in {k.name}",
                        kernel=k.name,
                        acc=acc.name,
                        tm=acc.dims[0],
                        tn=acc.dims[1],
                        factor=str(DEFAULT_FACTOR) if forward else "",
                    )
                )
        return sites

    def _selects(self, vals: list[int | None], forward: bool) -> bool:
        """Forward: a 1 x 1 micro-tile; backward: a micro-tile of more than one output."""
        if forward:
            return all(v == 1 for v in vals)
        return not all(v == 1 for v in vals) and not all(v is not None and v <= 1 for v in vals)

    # ---- constants ---------------------------------------------------------------------------
    def _const(self, src: CudaSource, kernel: Function, name: str) -> tuple[IntConstant | None, str]:
        """The constant definition behind `name` in `kernel` (directly or via launch template args)."""
        consts = {c.name: c for c in int_constants(src)}
        if name in consts:
            return consts[name], ""
        tparams = [tp.name for tp in kernel.template_params]
        if name in tparams:
            args = {
                T.squash(T.template_map(src, kernel, ls).get(name, ""))
                for ls in T.launches_of(src, kernel.name)
            }
            if len(args) != 1:
                return None, f"launches pass {len(args)} different values for {name}"
            (arg,) = args
            if arg in consts:
                return consts[arg], ""
            return (
                None,
                f"{name} is the literal {arg or '?'} at the launch (name it with a constexpr to rewrite it)",
            )
        return None, f"{name} is not a compile-time constant of this file"

    def _value(self, src: CudaSource, kernel: Function, name: str) -> int | None:
        if re.fullmatch(r"\d+", name):
            return int(name)
        c, _ = self._const(src, kernel, name)
        return c.value if c is not None else None

    def _plan(
        self, src: CudaSource, site: Site, forward: bool
    ) -> tuple[list[Precondition], list[tuple[IntConstant, int]]]:
        d = site.details
        kernel = src.kernel(d.get("kernel"))
        if kernel is None:
            raise Refused(f"{self.name}: kernel {d.get('kernel')} not found")
        facts: list[Precondition] = []
        changes: dict[str, tuple[IntConstant, int]] = {}
        factor = int(d.get("factor") or DEFAULT_FACTOR)
        micro = []
        named = [m for m in dict.fromkeys((d["tm"], d["tn"])) if not re.fullmatch(r"1", m)]
        for dim in named:
            c, why = self._const(src, kernel, dim)
            facts.append(
                Precondition(
                    "micro_tile_constant",
                    c is not None,
                    f"{dim} = {c.value} is a named compile-time size" if c else why,
                    "Layout",
                )
            )
            if c is not None:
                micro.append((dim, c))
        if len(micro) != len(named):
            return facts, []
        text = T.squash(src.text)
        for dim, c in micro:
            old = c.value
            new = self._target(old, forward, factor)
            changes[c.name] = (c, new)
            # `X / TM` or `X / (TM)`; not `X / (TM * TN)`, where X is divided by the whole micro-tile
            nums = set(re.findall(rf"\(?(\w+)\)?/(?:\({re.escape(dim)}\)|{re.escape(dim)}(?![\w*]))", text))
            nums |= set(re.findall(rf"(\w+)/{re.escape(c.name)}(?![\w*])", text))
            nums.discard(dim)
            nums = nums or _tile_by_axis(src, kernel, d["tm"], d["tn"], dim, text)
            if not nums:
                facts.append(
                    Precondition(
                        "block_tile_in_terms_of_micro_tile",
                        False,
                        f"no block size is written as X / {dim}: the thread count cannot be kept",
                        "Layout",
                    )
                )
                continue
            for num in sorted(nums):
                bc, why = self._const(src, kernel, num)
                if bc is None:
                    facts.append(Precondition("block_tile_constant", False, why, "Layout"))
                    continue
                if bc.name in changes and changes[bc.name][1] != bc.value * new // old:
                    facts.append(
                        Precondition(
                            "consistent_block_tile",
                            False,
                            f"{num} is divided by two micro-tile sizes",
                            "Layout",
                        )
                    )
                    continue
                ok = (bc.value * new) % old == 0
                facts.append(
                    Precondition(
                        "block_tile_divisible",
                        ok,
                        f"{num} = {bc.value} is a multiple of {dim} = {old}"
                        if ok
                        else f"{num} = {bc.value} is not a multiple of {dim} = {old}",
                        "Layout",
                    )
                )
                changes[bc.name] = (bc, bc.value * new // old)
        grids = [T.config_nodes(src, ls)[0] for ls in T.launches_of(src, kernel.name)]
        block_names = {c.name for c, _ in changes.values()} - {c.name for _, c in micro}
        in_grid = all(_grid_uses(src, g, block_names, kernel) for g in grids) and bool(grids)
        facts.append(
            Precondition(
                "grid_follows_block_tile",
                in_grid,
                "the launcher's grid is computed from the block tile sizes"
                if in_grid
                else "the launcher's grid does not use the block tile constants",
                "Layout",
            )
        )
        if not forward and all(f.holds for f in facts):
            facts += self._asserts_after(src, kernel, changes)
        return facts, list(changes.values())

    def _asserts_after(
        self, src: CudaSource, kernel: Function, changes: dict[str, tuple[IntConstant, int]]
    ) -> list[Precondition]:
        """The file's static_asserts at the new sizes. When they fail (a loader that needs every
        tile to hold a whole multiple of the block's threads, now that the block has more threads
        per tile row), the K tile the two shared tiles share is doubled until they hold (any K tile
        computes the same product); none holding refuses. Listed only when the plain edit fails
        them, so steps that never needed it keep their precondition sets."""

        def failing(extra: dict[str, tuple[IntConstant, int]]) -> list[str]:
            edits = [edit.Edit(c.start, c.end, str(v)) for c, v in {**changes, **extra}.values()]
            after = edit.apply_edits(src, edits)
            k = after.kernel(kernel.name)
            return failing_asserts(after, k) if k is not None else []

        first = failing({})
        if not first:
            return []
        bk, why = self._k_tile(src, kernel)
        if bk is not None and bk.name not in changes:
            for doubling in range(1, _MAX_K_DOUBLINGS + 1):
                new = bk.value << doubling
                if not failing({bk.name: (bk, new)}):
                    changes[bk.name] = (bk, new)
                    return [
                        Precondition(
                            "static_asserts_hold",
                            True,
                            f"the file's static_asserts hold once the K tile {bk.name} grows {bk.value} -> {new}",
                            "Layout",
                        )
                    ]
            why = f"no K tile {bk.name} up to {bk.value << _MAX_K_DOUBLINGS} satisfies them"
        return [
            Precondition("static_asserts_hold", False, f"{first[0]} fails at the new sizes; {why}", "Layout")
        ]

    def _k_tile(self, src: CudaSource, kernel: Function) -> tuple[IntConstant | None, str]:
        """The constant behind the one size the kernel's 2-D shared tiles have in common (A's
        [BM][BK] and B's [BK][BN]: the K tile)."""
        dims: list[set[str]] = []
        for d in T.walk(src.node_for(kernel)):
            if d.type == "declaration" and "__shared__" in src.text_of(d).split("[")[0]:
                sizes = re.findall(r"\[\s*(\w+)\s*\]", T.squash(src.text_of(d)))
                if len(sizes) == 2:
                    dims.append(set(sizes))
        common = set.intersection(*dims) if len(dims) >= 2 else set()
        if len(common) != 1:
            return None, "no K tile shared by two 2-D shared tiles to grow"
        (name,) = common
        return self._const(src, kernel, name)

    def _target(self, old: int, forward: bool, factor: int) -> int:
        """The micro-tile size a step sets (the block tile scales with it, threads kept)."""
        return old * factor if forward else 1

    def removal_preconditions(self, src: CudaSource, site: Site) -> list[Precondition]:
        return self._plan(src, site, forward=False)[0]

    def preconditions(self, src: CudaSource, site: Site) -> list[Precondition]:
        return self._plan(src, site, forward=site.details.get("factor", "") != "")[0]

    def _edit(self, src: CudaSource, site: Site, forward: bool) -> CudaSource:
        facts, changes = self._plan(src, site, forward)
        self._check(facts)
        return edit.apply_edits(src, [edit.Edit(c.start, c.end, str(v)) for c, v in changes])

    def _remove(self, src: CudaSource, site: Site) -> CudaSource:
        return self._edit(src, site, forward=False)

    def _apply(self, src: CudaSource, site: Site) -> CudaSource:
        return self._edit(src, site, forward=True)


def _grid_uses(src: CudaSource, grid: ts.Node, names: set[str], kernel: Function) -> bool:
    """True when the grid expression (or the launcher variable it names) mentions one of `names`."""
    text = src.text_of(grid)
    launcher = T.fn_node_of(grid)
    if re.fullmatch(r"\s*\w+\s*", text) and launcher is not None:
        decl = next(
            (n for n in T.walk(launcher) if n.type == "declaration" and T.decl_name(n) == text.strip()), None
        )
        if decl is not None:
            text = src.text_of(decl)
    return any(re.search(rf"(?<!\w){re.escape(n)}(?!\w)", text) for n in names)


def _tile_by_axis(src: CudaSource, kernel: Function, tm: str, tn: str, dim: str, text: str) -> set[str]:
    """The block tile a micro-tile size scales with when the thread count is written as
    `BM * BN / (TM * TN)` (no `BM / TM`): the size the row (TM) or column (TN) block index is
    multiplied by in the kernel, `blockIdx.y * BM` or `blockIdx.x * BN`."""
    pair = rf"/\((?:{re.escape(tm)}\*{re.escape(tn)}|{re.escape(tn)}\*{re.escape(tm)})\)"
    if tm == tn or not re.search(pair, text):
        return set()
    axis = "y" if dim == tm else "x"
    body = T.squash(src.text_of(src.node_for(kernel)))
    found = set(re.findall(rf"blockIdx\.{axis}\*\(?(\w+)\)?", body))
    found |= set(re.findall(rf"\(?(\w+)\)?\*blockIdx\.{axis}(?!\w)", body))
    return found - {tm, tn} if len(found) == 1 else set()
