"""Coalesced thread mapping on a 2-D grid: the thread index that varies fastest in a warp
(`threadIdx.x`) walks the coordinate that is contiguous in memory.

A kernel on a 2-D grid names two coordinates, each one axis's global index
(`row = blockIdx.y * blockDim.y + threadIdx.y; col = blockIdx.x * blockDim.x + threadIdx.x`).
The 32 threads of a warp share `threadIdx.y` and take consecutive `threadIdx.x`. When the x
coordinate is the one added with stride 1 in the store's index (`C[row * ldc + col]`), a warp
stores 32 consecutive elements: one transaction. Bound the other way (x walks `row`), the same
warp writes 32 elements `ldc` apart: 32 transactions, and each load indexed like the store too.

Backward: the two coordinates trade axes (`x` <-> `y` in both definitions) and every launch of
the kernel trades the grid's and the block's first two components (references to the block's
`.x`/`.y` inside the grid exchanged with them), so every coordinate still covers its extent.
Forward: the same rewrite on a kernel whose x coordinate is the strided one.
Preconditions: the kernel reads the thread, block and grid indices of x and y only in those two
definitions (anything else, a shared tile indexed by `threadIdx.x`, would change meaning); every
global store agrees on which coordinate is contiguous; each launch's grid and block are 2-D `dim3`
values written in the launcher (or inline) and read nowhere else.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import tree_sitter as ts

from klineage.deopt import _threads as T
from klineage.deopt.base import Operator, Precondition, Refused, Site
from klineage.source import edit
from klineage.source.constructs import Function
from klineage.source.model import CudaSource

_BUILTIN = re.compile(r"\b(threadIdx|blockIdx|blockDim|gridDim)\.([xy])\b")
_AXIS_FORMS = (
    re.compile(r"^blockIdx\.(?P<a>[xy])\*blockDim\.(?P=a)\+threadIdx\.(?P=a)$"),
    re.compile(r"^blockDim\.(?P<a>[xy])\*blockIdx\.(?P=a)\+threadIdx\.(?P=a)$"),
    re.compile(r"^threadIdx\.(?P<a>[xy])\+blockIdx\.(?P=a)\*blockDim\.(?P=a)$"),
    re.compile(r"^threadIdx\.(?P<a>[xy])\+blockDim\.(?P=a)\*blockIdx\.(?P=a)$"),
)


def _axis(text: str) -> str | None:
    """'x' or 'y' when `text` is that axis's global index (casts and parentheses allowed)."""
    t = re.sub(r"\(((?:blockIdx|blockDim|threadIdx)\.[xy])\)", r"\1", T.strip_casts(text))
    t = re.sub(r"\((block(?:Idx|Dim)\.[xy]\*block(?:Idx|Dim)\.[xy])\)", r"\1", t)
    t = t[1:-1] if t.startswith("(") and t.endswith(")") else t
    return next((m.group("a") for rx in _AXIS_FORMS if (m := rx.match(t))), None)


def _swap_axes(text: str) -> str:
    return _BUILTIN.sub(lambda m: f"{m.group(1)}.{'y' if m.group(2) == 'x' else 'x'}", text)


def _terms(index: str) -> list[str]:
    """The top-level `+` terms of an index expression (whitespace and casts removed)."""
    t = re.sub(r"\((?:unsigned)?(?:long|longlong|int64_t|uint64_t|ptrdiff_t)\)", "", T.strip_casts(index))
    out, depth, cur = [], 0, ""
    for ch in t:
        depth += ch in "([" and 1 or (-1 if ch in ")]" else 0)
        if ch == "+" and depth == 0:
            out.append(cur)
            cur = ""
        else:
            cur += ch
    return [*out, cur]


@dataclass(frozen=True)
class _Mapping:
    """A kernel's two per-axis coordinates and the axis of the one its stores walk contiguously."""

    kernel: Function
    fn: ts.Node
    coords: dict[str, tuple[str, ts.Node]]  # axis -> (name, the initializer node)
    contiguous: str | None  # the axis whose coordinate is the stride-1 term of every store


def _stores(src: CudaSource, k: Function, fn: ts.Node) -> list[str]:
    """The index texts of the global stores (`p[...] = ...` on a pointer parameter)."""
    ptrs = {p.name for p in k.params if p.is_pointer}
    out = []
    for n in T.walk(fn):
        left = n.child_by_field_name("left") if n.type == "assignment_expression" else None
        if left is None or left.type != "subscript_expression":
            continue
        arr = left.child_by_field_name("argument")
        idx = left.child_by_field_name("indices") or left.child_by_field_name("index")
        if arr is not None and src.text_of(arr) in ptrs and idx is not None:
            out.append(src.text_of(idx).strip("[] "))
    return out


def _mapping(src: CudaSource, k: Function) -> _Mapping | None:
    fn = src.node_for(k)
    coords: dict[str, tuple[str, ts.Node]] = {}
    for d in T.walk(fn):
        v = d.child_by_field_name("value") if d.type == "init_declarator" else None
        name = T.declarator_ident(d) if v is not None else None
        if v is None or not name or name in T.assigned_in(fn):
            continue
        if (a := _axis(src.text_of(v).strip("{}"))) is not None and a not in coords:
            coords[a] = (name, v)
    if set(coords) != {"x", "y"}:
        return None
    stores = _stores(src, k, fn)
    unit: set[str] = set()
    for index in stores:
        terms = _terms(index)
        found = [a for a, (name, _) in coords.items() if name in terms]
        strided = [a for a, (name, _) in coords.items() if any(re.search(rf"\b{name}\b", t) for t in terms)]
        if len(found) != 1 or len(strided) != 2:
            return _Mapping(k, fn, coords, None)
        unit.add(found[0])
    return _Mapping(k, fn, coords, unit.pop() if len(unit) == 1 else None)


def _dim3_parts(src: CudaSource, launcher: ts.Node, node: ts.Node) -> tuple[ts.Node | None, str | None]:
    """(the component list of a 2- or 3-D dim3 launch argument, the launcher local naming it)."""
    name = None
    if node.type == "identifier":
        name = src.text_of(node)
        decls = [d for d in T.walk(launcher) if d.type == "init_declarator" and T.declarator_ident(d) == name]
        if len(decls) != 1 or name in T.assigned_in(launcher):
            return None, name
        node = decls[0].child_by_field_name("value") or decls[0]
    if node.type == "call_expression":
        node = node.child_by_field_name("arguments")
    if node is None or node.type not in ("initializer_list", "argument_list"):
        return None, name
    return (node if len(node.named_children) in (2, 3) else None), name


class CoalescedMapping(Operator):
    name = "coalesced_mapping"
    category = "tiling"
    intent = (
        "On a 2-D grid, let threadIdx.x walk the coordinate that is contiguous in memory (the column of a "
        "row-major output): a warp's 32 stores and loads fall on consecutive addresses, one transaction."
    )
    mechanical_apply = True

    def _sites(self, src: CudaSource, contiguous: str) -> list[Site]:
        out = []
        for k in src.kernels:
            m = _mapping(src, k)
            if m is not None and m.contiguous == contiguous:
                x, y = m.coords["x"][0], m.coords["y"][0]
                out.append(
                    self.site(
                        src,
                        src.node_for(k),
                        f"threadIdx.x walks {x}, threadIdx.y {y} in {k.name}",
                        kernel=k.name,
                    )
                )
        return out

    def find(self, src: CudaSource) -> list[Site]:
        return self._sites(src, "x")

    def find_forward(self, src: CudaSource) -> list[Site]:
        return self._sites(src, "y")

    def _at(self, src: CudaSource, site: Site) -> _Mapping:
        k = next((k for k in src.kernels if k.name == site.details.get("kernel")), None)
        m = _mapping(src, k) if k is not None else None
        if m is None or m.contiguous is None:
            raise Refused(f"{self.name}: no 2-D coordinate mapping in {site.details.get('kernel')}")
        return m

    def _facts(self, src: CudaSource, site: Site) -> list[Precondition]:
        m = self._at(src, site)
        reads = len(_BUILTIN.findall(src.text_of(m.fn)))
        facts = [
            Precondition(
                "mapping_only",
                reads == 6,
                "the thread, block and grid indices of x and y are read only in the two coordinates"
                if reads == 6
                else f"the kernel reads x/y thread or block indices {reads - 6} more time(s): a swap would change them",
                "Layout",
            )
        ]
        launches = T.launches_of(src, m.kernel.name)
        facts.append(
            Precondition(
                "launch_in_file", bool(launches), f"{len(launches)} launch(es) in the file", "Layout"
            )
        )
        for ls in launches:
            problem = self._launch_problem(src, ls)
            facts.append(
                Precondition(
                    "launch_2d",
                    problem is None,
                    f"launch at line {ls.line}: 2-D grid and block, read only by the launch"
                    if problem is None
                    else f"launch at line {ls.line}: {problem}",
                    "Layout",
                )
            )
        return facts

    def _launch_problem(self, src: CudaSource, ls) -> str | None:
        launcher = T.enclosing_launcher(src, ls)
        cfg = T.config_nodes(src, ls)
        if launcher is None or len(cfg) < 2:
            return "no grid and block to read"
        for what, node in (("grid", cfg[0]), ("block", cfg[1])):
            parts, name = _dim3_parts(src, launcher, node)
            if parts is None:
                return f"the {what} is not a 2-D dim3 written in the launcher"
            if name is not None and [
                n
                for n in T.walk(launcher)
                if n.type == "identifier"
                and src.text_of(n) == name
                and not any(c.start_byte <= n.start_byte < c.end_byte for c in cfg)
                and n.parent is not None
                and n.parent.type != "init_declarator"
                and not (what == "block" and _in_grid(src, launcher, cfg[0], n))
            ]:
                return f"`{name}` is read outside the launch"
        return None

    def removal_preconditions(self, src: CudaSource, site: Site) -> list[Precondition]:
        return self._facts(src, site)

    def preconditions(self, src: CudaSource, site: Site) -> list[Precondition]:
        return self._facts(src, site)

    def _swap(self, src: CudaSource, site: Site) -> CudaSource:
        m = self._at(src, site)
        edits = [edit.replace(v, _swap_axes(src.text_of(v))) for _, v in m.coords.values()]
        for ls in T.launches_of(src, m.kernel.name):
            launcher = T.enclosing_launcher(src, ls)
            cfg = T.config_nodes(src, ls)
            assert launcher is not None
            grid, _ = _dim3_parts(src, launcher, cfg[0])
            block, bname = _dim3_parts(src, launcher, cfg[1])
            assert grid is not None and block is not None
            gx, gy = grid.named_children[:2]
            bx, by = block.named_children[:2]

            def flip(text: str, name: str | None = bname) -> str:
                if name is None:
                    return text
                return re.sub(
                    rf"\b{re.escape(name)}\.([xy])\b",
                    lambda q: f"{name}.{'y' if q.group(1) == 'x' else 'x'}",
                    text,
                )

            edits += [
                edit.Edit(gx.start_byte, gx.end_byte, flip(src.text_of(gy))),
                edit.Edit(gy.start_byte, gy.end_byte, flip(src.text_of(gx))),
                *edit.swap(src, bx, by),
            ]
        return edit.apply_edits(src, edits)

    def _remove(self, src: CudaSource, site: Site) -> CudaSource:
        return self._swap(src, site)

    def _apply(self, src: CudaSource, site: Site) -> CudaSource:
        return self._swap(src, site)


def _in_grid(src: CudaSource, launcher: ts.Node, grid_arg: ts.Node, n: ts.Node) -> bool:
    """Whether identifier `n` sits in the grid's components (the grid's own declaration included)."""
    parts, _ = _dim3_parts(src, launcher, grid_arg)
    return parts is not None and parts.start_byte <= n.start_byte < parts.end_byte
