"""Which kernels need fibers: those that reach a barrier or warp collective, following calls.

A kernel that never synchronizes runs its threads as a plain loop, much faster than fibers. The
analysis is conservative: any mention of a synchronizing name in the kernel or in a function
defined in the file that it mentions (transitively) counts; calls through a variable or functor
also follow every `operator()` defined in the file. The runtime still reports a clear error if a
collective is reached in plain-loop mode.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

import tree_sitter as ts

SYNC_NAMES = frozenset(
    {
        "__syncthreads",
        "__syncthreads_count",
        "__syncthreads_and",
        "__syncthreads_or",
        "__syncwarp",
        "__ballot_sync",
        "__any_sync",
        "__all_sync",
        "__activemask",
        "this_thread_block",
        "tiled_partition",
        "thread_block",
        "thread_block_tile",
        "coalesced_threads",
        "sync",
        "shfl",
        "shfl_up",
        "shfl_down",
        "shfl_xor",
        "ballot",
        "any",
        "all",
        "reduce",
        "inclusive_scan",
        "exclusive_scan",
        "barrier",
        "warp_collective",
        "load_matrix_sync",
        "store_matrix_sync",
        "mma_sync",
    }
)
SYNC_PREFIXES = ("__shfl", "__reduce_", "__match_")
_IDENTS = {"identifier", "field_identifier", "type_identifier", "namespace_identifier"}


@dataclass
class Function:
    name: str
    node: ts.Node
    is_global: bool
    is_template: bool
    idents: set[str] = field(default_factory=set)
    calls_unknown: bool = False


def function_name(fn: ts.Node, src: bytes) -> str:
    """Unqualified name of a function_definition ('' when it has none we understand)."""
    d = fn.child_by_field_name("declarator")
    while d is not None and d.type not in (
        "identifier",
        "field_identifier",
        "operator_name",
        "destructor_name",
    ):
        if d.type == "qualified_identifier":
            d = d.child_by_field_name("name")
            continue
        d = d.child_by_field_name("declarator")
    return src[d.start_byte : d.end_byte].decode().replace(" ", "") if d is not None else ""


def _idents(node: ts.Node, src: bytes) -> tuple[set[str], set[str]]:
    """(every identifier, names called directly) under `node`."""
    names: set[str] = set()
    called: set[str] = set()
    stack = [node]
    while stack:
        n = stack.pop()
        if n.type in _IDENTS:
            names.add(src[n.start_byte : n.end_byte].decode(errors="replace"))
        elif n.type == "gnu_asm_expression":
            from klineage.gates.emu.ptx import is_warp_collective

            if is_warp_collective(n, src):
                names.add("warp_collective")
        elif n.type == "call_expression":
            f = n.child_by_field_name("function")
            if f is not None and f.type == "identifier":
                called.add(src[f.start_byte : f.end_byte].decode(errors="replace"))
        stack.extend(n.children)
    return names, called


def collect_functions(root: ts.Node, src: bytes) -> list[Function]:
    out: list[Function] = []
    stack = [root]
    while stack:
        n = stack.pop()
        if n.type == "function_definition":
            name = function_name(n, src)
            is_global = any(c.type == "__global__" for c in n.children)
            is_template = n.parent is not None and n.parent.type == "template_declaration"
            body = n.child_by_field_name("body")
            fn = Function(name, n, is_global, is_template)
            if body is not None:
                fn.idents, called = _idents(body, src)
                fn.calls_unknown = bool(called)
            out.append(fn)
        stack.extend(n.children)
    return out


def _is_sync_name(name: str, extra: frozenset[str] = frozenset()) -> bool:
    return name in SYNC_NAMES or name in extra or name.startswith(SYNC_PREFIXES)


def sync_macros(root: ts.Node, src: bytes) -> frozenset[str]:
    """Names of macros whose expansion (transitively) mentions a synchronizing name."""
    defs: dict[str, set[str]] = {}
    stack = [root]
    while stack:
        n = stack.pop()
        if n.type in ("preproc_def", "preproc_function_def"):
            name = n.child_by_field_name("name")
            value = n.child_by_field_name("value")
            if name is not None and value is not None:
                words = set(
                    re.findall(
                        r"[A-Za-z_]\w*", src[value.start_byte : value.end_byte].decode(errors="replace")
                    )
                )
                defs[src[name.start_byte : name.end_byte].decode()] = words
            continue
        stack.extend(n.children)
    found: set[str] = set()
    changed = True
    while changed:
        changed = False
        for name, words in defs.items():
            if name not in found and any(_is_sync_name(w, frozenset(found)) for w in words):
                found.add(name)
                changed = True
    return frozenset(found)


def _direct_sync(fn: Function, extra: frozenset[str]) -> bool:
    return any(_is_sync_name(i, extra) for i in fn.idents)


def needs_fibers(functions: list[Function], macros: frozenset[str] = frozenset()) -> dict[str, bool]:
    """Kernel name -> whether any of its definitions may reach a barrier or collective
    (`macros`: macro names that expand to one, from `sync_macros`)."""
    by_name: dict[str, list[Function]] = {}
    for f in functions:
        by_name.setdefault(f.name, []).append(f)
    operators = by_name.get("operator()", [])
    memo: dict[int, bool] = {}

    def reaches(f: Function, seen: set[int]) -> bool:
        key = id(f.node)
        if key in memo:
            return memo[key]
        if key in seen:
            return False
        seen.add(key)
        result = _direct_sync(f, macros)
        if not result:
            callees = [g for name in f.idents for g in by_name.get(name, []) if g is not f]
            if f.calls_unknown:
                callees += operators
            result = any(reaches(g, seen) for g in callees)
        memo[key] = result
        return result

    out: dict[str, bool] = {}
    for f in functions:
        if f.is_global:
            out[f.name] = out.get(f.name, False) or reaches(f, set())
    return out
