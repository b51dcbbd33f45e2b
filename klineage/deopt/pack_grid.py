"""The launch side of a one-thread-per-element kernel packed W elements per thread (packs.py).

Packed, thread t takes the elements [t*W, t*W + W), so the original grid (one thread per element)
leaves all but 1/W of its blocks with nothing to do: on the H200 those empty blocks made packed
axpy, rotary, gelu_bias and swiglu slower than their naive kernels. Every launch of the kernel
therefore takes ceil(G / W) blocks instead of G, whatever the grid expression G is (ceil of a
ceil-division is the ceil-division by the product, so the packed threads still cover the range).

The kernel's scalar fallback (pointers not 16-byte aligned) keeps one element per thread, so the
launch shrinks the grid only when the same pointers are aligned: the grid becomes
`(aligned(args) ? (G + W - 1) / W : G)`, the host-side twin of the kernel's alignment test on the
launch's arguments. That needs each packed array to be a kernel parameter used from element 0 and
never reassigned in the kernel, a 1-D grid that is an integer expression without side effects.
A file without a launch of the kernel (a kernel library) keeps its launcher's grid: correct, only
wasteful. Removal restores G from the conditional.
"""

from __future__ import annotations

import re

import tree_sitter as ts

from klineage.deopt import _cexpr as X
from klineage.deopt import _threads as T
from klineage.source import edit
from klineage.source.model import CudaSource
from klineage.source.syntax import squash, unparenthesized, written_names

PACK_BYTES = 16
_SIDE_EFFECT = frozenset({"assignment_expression", "update_expression"})
_CASTS = frozenset({"static_cast", "unsigned", "int", "size_t"})
_INT_CAST = re.compile(r"reinterpret_cast<unsignedlonglong>\(")
_MODULO_ZERO = re.compile(rf"%{PACK_BYTES}u\)==0$")


def refusals(src: CudaSource, fn: ts.Node, arrays: list[tuple[str, str]]) -> list[str]:
    """Why the launches of kernel `fn` cannot shrink their grid for packs of `arrays`
    ((name, base) pairs); empty when every launch can (or the file launches it nowhere)."""
    name = X.N.func_name(fn)
    kernel = src.kernel(name)
    launches = T.launches_of(src, name)
    if kernel is None or not launches:
        return []
    out = []
    params = {p.name for p in kernel.params}
    written = written_names(fn)  # the pointer itself, not its elements
    for a, base in arrays:
        if a not in params or base:
            out.append(
                f"{a} is not a kernel parameter used from element 0: the launch cannot test its alignment"
            )
        elif a in written:
            out.append(f"the kernel reassigns {a}: the launch's argument is not the pointer it packs")
    for ls in launches:
        cfg = T.config_nodes(src, ls)
        if not cfg or T.grid_is_dim3(src, ls):
            out.append(f"launch at line {ls.line}: the grid is a dim3, not one count of blocks")
        elif any(
            n.type in _SIDE_EFFECT or (n.type == "call_expression" and _call(n)) for n in T.walk(cfg[0])
        ):
            out.append(f"launch at line {ls.line}: the grid expression has side effects or calls")
        if len(ls.args) < len(kernel.params):
            out.append(f"launch at line {ls.line}: fewer arguments than the kernel's parameters")
    return out


def _call(n: ts.Node) -> bool:
    """A call other than a conversion (`unsigned(...)`, `static_cast<...>(...)`)."""
    return X.callee_name(n) not in _CASTS


def _aligned(args: list[str]) -> str:
    ptrs = " | ".join(f"reinterpret_cast<unsigned long long>({a})" for a in args)
    return f"(({ptrs}) % {PACK_BYTES}u) == 0"


def shrink(src: CudaSource, fn: ts.Node, arrays: list[str], width: int) -> list[edit.Edit]:
    """Edits giving every launch of kernel `fn` ceil(G / width) blocks when the packed pointers
    (`arrays`, kernel parameters) are aligned, G blocks otherwise."""
    name = X.N.func_name(fn)
    kernel = src.kernel(name)
    if kernel is None:
        return []
    out = []
    for ls in T.launches_of(src, name):
        pmap = T.param_map(kernel, ls)
        grid = src.text_of(T.config_nodes(src, ls)[0])
        packed = T.ceil_div(grid, str(width))
        out.append(T.replace_grid(src, ls, f"({_aligned([pmap[a] for a in arrays])} ? {packed} : {grid})"))
    return out


def restore(src: CudaSource, fn: ts.Node) -> list[edit.Edit]:
    """Edits giving back G to each launch of kernel `fn` whose grid is `(aligned(...) ? ... : G)`."""
    out = []
    for ls in T.launches_of(src, X.N.func_name(fn)):
        cfg = T.config_nodes(src, ls)
        cond = unparenthesized(cfg[0]) if cfg else None
        if cond is None or cond.type != "conditional_expression":
            continue
        test, alt = cond.child_by_field_name("condition"), cond.child_by_field_name("alternative")
        t = squash(src.text_of(test)) if test is not None else ""
        if alt is not None and _INT_CAST.search(t) and _MODULO_ZERO.search(t):
            out.append(edit.replace(cfg[0], src.text_of(alt)))
    return out
