"""Locals that only rename something: a thread coordinate or a shared array.

A local that only renames a thread coordinate (`const int tid = threadIdx.x;`) reads as the
coordinate itself, and the declaration goes. The block and row operators test `threadIdx.x` where
it stands (a block-strided loop's start, the `threadIdx.x == 0` fold); an alias hid those roles
(llm.c's block-per-row softmax reads the thread through `tid`).

Left alone: an alias the kernel writes or takes the address of, one declared more than once,
a non-integer alias, and one any use of which subtracts or negates: `threadIdx.x` is unsigned, so
`tid - 1` would wrap where the `int` went negative.

Likewise a pointer that only renames a `__shared__` array of its element type (`float* buf = smem;`)
reads as the array: the row operators tell an exchange between threads by the shared array's name,
and a declaration through the alias looked like a value read from another thread. Left alone: a
pointer the kernel writes or takes the address of, and any use under `sizeof` (a pointer's size is
not the array's).
"""

from __future__ import annotations

import re
from collections.abc import Callable

import tree_sitter as ts

from klineage.source import edit
from klineage.source import syntax as S
from klineage.source.canon.base import Rule
from klineage.source.edit import Edit
from klineage.source.model import CudaSource

_COORD = re.compile(r"^threadIdx\.[xyz]$")
_INT = re.compile(r"^(?:const\s+)?(?:unsigned\s+int|unsigned|int|int32_t|uint32_t)$")
#: parents of a use under which the unsigned coordinate could differ from the signed alias
_SIGN_SENSITIVE = ("-",)


_SHARED_SENSITIVE = ("sizeof_expression",)


class ThreadIndexAlias(Rule):
    name = "thread_index_alias"
    summary = "a local that only renames threadIdx reads as threadIdx"

    def edits(self, src: CudaSource) -> list[Edit]:
        return _inline_all(src, _alias_decls, _sign_sensitive)


class SharedArrayAlias(Rule):
    name = "shared_array_alias"
    summary = "a pointer that only renames a __shared__ array reads as the array"

    def edits(self, src: CudaSource) -> list[Edit]:
        return _inline_all(src, lambda s, fn: _pointer_aliases(s, fn, _shared_arrays(s, fn)), _under_sizeof)


def _inline_all(
    src: CudaSource,
    find: Callable[[CudaSource, ts.Node], list[ts.Node]],
    sensitive: Callable[[ts.Node], bool],
) -> list[Edit]:
    """`_inline` on every alias declaration `find` reports in the file's device code."""
    out: list[Edit] = []
    for f in src.functions:
        if f.kind in ("kernel", "device"):
            fn = src.node_for(f)
            for decl in find(src, fn):
                out += _inline(src, fn, decl, sensitive)
    return out


def _shared_arrays(src: CudaSource, fn: ts.Node) -> dict[str, str]:
    """name -> element type of the `__shared__` arrays declared in `fn`."""
    out = {}
    for n in S.walk(fn):
        if n.type == "declaration" and any(c.text == b"__shared__" for c in n.children):
            ty = n.child_by_field_name("type")
            for d in n.children_by_field_name("declarator"):
                if d.type == "array_declarator" and ty is not None and (nm := S.declarator_ident(d)):
                    out[nm] = S.squash(src.text_of(ty))
    return out


def _pointer_aliases(src: CudaSource, fn: ts.Node, shared: dict[str, str]) -> list[ts.Node]:
    """Declarations of one non-const pointer of a shared array's element type set to that array."""
    out = []
    for n, ty, ptr, v in S.pointer_inits(fn):
        arr = S.squash(src.text_of(v))
        if (
            arr in shared
            and shared[arr] == S.squash(src.text_of(ty))
            and S.squash(src.text_of(ptr)).count("*") == 1
        ):
            out.append(n)
    return out


def _under_sizeof(use: ts.Node) -> bool:
    return any(a.type in _SHARED_SENSITIVE for a in S.ancestors(use))


def _alias_decls(src: CudaSource, fn: ts.Node) -> list[ts.Node]:
    """Declarations of exactly one integer local initialised to a bare thread coordinate."""
    out = []
    for n in S.walk(fn):
        if n.type != "declaration" or len(n.children_by_field_name("declarator")) != 1:
            continue
        d = n.child_by_field_name("declarator")
        v = d.child_by_field_name("value") if d is not None and d.type == "init_declarator" else None
        ty = " ".join(src.text_of(n)[: d.start_byte - n.start_byte].split()) if d is not None else ""
        if v is not None and _COORD.match(S.squash(src.text_of(v))) and _INT.match(ty):
            out.append(n)
    return out


def _inline(src: CudaSource, fn: ts.Node, decl: ts.Node, sensitive: Callable[[ts.Node], bool]) -> list[Edit]:
    """Every use of the declared alias replaced by its value, the declaration blanked; nothing
    when the alias is written, address-taken, declared twice or a use is `sensitive`."""
    d = decl.child_by_field_name("declarator")
    name = S.declarator_ident(d) if d is not None else None
    value = d.child_by_field_name("value") if d is not None else None
    if name is None or value is None or _rebound(fn, name):
        return []
    if (
        sum(
            1 for n in S.walk(fn) if n.type in ("declaration", "parameter_declaration") and _declares(n, name)
        )
        != 1
    ):
        return []
    uses = [
        n
        for n in S.walk(fn)
        if n.type == "identifier"
        and n.text == name.encode()
        and not d.start_byte <= n.start_byte < d.end_byte
    ]
    if any(sensitive(u) for u in uses):
        return []
    coord = S.squash(src.text_of(value))
    # the declaration's line stays (empty): later lines keep their numbers, which sites report
    return [edit.replace(decl, "")] + [edit.replace(u, coord) for u in uses]


def _rebound(fn: ts.Node, name: str) -> bool:
    """The alias itself is assigned, stepped or has its address taken (writes through it are fine)."""
    return bool(S.writes_to(fn, name)) or any(
        n.type == "pointer_expression"
        and n.children[0].type == "&"
        and (a := n.child_by_field_name("argument")) is not None
        and a.text == name.encode()
        for n in S.walk(fn)
    )


def _declares(decl: ts.Node, name: str) -> bool:
    return any(S.declarator_ident(d) == name for d in decl.children_by_field_name("declarator"))


def _sign_sensitive(use: ts.Node) -> bool:
    """The use (through parentheses) is an operand of a subtraction or a negation."""
    n = use
    while n.parent is not None and n.parent.type == "parenthesized_expression":
        n = n.parent
    p = n.parent
    if p is None:
        return False
    if p.type in ("binary_expression", "unary_expression"):
        op = p.child_by_field_name("operator")
        return op is not None and op.type in _SIGN_SENSITIVE
    return False
