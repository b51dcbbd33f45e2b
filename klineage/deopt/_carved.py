"""Tiles carved out of one dynamic shared buffer, read as shared arrays of their own.

A kernel that sizes its tiles at run time declares one `extern __shared__ T buf[];` and carves it
by pointers: `T* k_tile = &buf[tile]; T* v_tile = buf + 2 * tile;` (the first tile is `buf`
itself once canon `shared_array_alias` has read `T* q_tile = buf;` as the buffer). Each carve is a
one-dimensional shared array for the staging operator: its own store, barrier and reads. CUDA has
no text for separate dynamic arrays (every `extern __shared__` array starts at the same address),
so this is a view for the operators, not a canonical rewrite: the removal deletes a carve's
declaration, and the buffer's stays while anything is carved from it.

A carve is a pointer of the buffer's element type, declared once with one declarator, never
rebound and never address-taken; the layout is the author's (the tiles are taken as disjoint, as
the kernel's own correctness needs; the gate checks the result). A dynamic buffer nothing carves,
used only through subscripts, is one flat tile too (the first tile, once its carves are gone).
"""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass

import tree_sitter as ts

from klineage.source import syntax as S
from klineage.source.constructs import SharedDecl
from klineage.source.model import CudaSource


@dataclass(frozen=True)
class Region:
    """One tile of a carved buffer, as the shared array the staging operator reads."""

    decl: SharedDecl  # one flat dimension; the carve's declaration (the buffer's for the first tile)
    keep_declaration: bool  # the buffer itself: other tiles are carved from its declaration
    carves: tuple[tuple[int, int], ...]  # byte ranges of the carving declarations (not uses of the buffer)


def carved_regions(src: CudaSource) -> list[Region]:
    """The tiles of every function's one dynamic shared buffer that carving pointers split."""
    out: list[Region] = []
    for buf in (d for d in src.shared_decls if d.is_dynamic and d.function is not None):
        if sum(1 for o in src.shared_decls if o.function == buf.function and o.is_dynamic) != 1:
            continue
        fn = src.node_for(src.function(buf.function))  # type: ignore[arg-type]
        carves = _carves(src, fn, buf)
        if not carves and not _flat_only(fn, buf):
            continue
        ranges = tuple((c.start_byte, c.end_byte) for c in carves)
        out.append(Region(_flat(buf, buf), True, ranges))
        for c in carves:
            name = S.decl_name(c) or ""
            view = dataclasses.replace(
                buf,
                name=name,
                node_type=c.type,
                start=c.start_byte,
                end=c.end_byte,
                line=c.start_point.row + 1,
                end_line=c.end_point.row + 1,
            )
            out.append(Region(_flat(view, buf), False, ranges))
    return out


def _flat_only(fn: ts.Node, buf: SharedDecl) -> bool:
    """Nothing carves the buffer and every use subscripts it: a flat array of its own (what is
    left of a carved buffer once the staging removal took its carves)."""
    uses = [
        n
        for n in S.walk(fn)
        if n.type == "identifier"
        and n.text == buf.name.encode()
        and not (buf.start <= n.start_byte < buf.end)
    ]
    return bool(uses) and all(
        u.parent is not None
        and u.parent.type == "subscript_expression"
        and u.parent.child_by_field_name("argument") == u
        for u in uses
    )


def _flat(view: SharedDecl, buf: SharedDecl) -> SharedDecl:
    return dataclasses.replace(view, dims=("",), is_extern=False, element_type=buf.element_type)


def _carves(src: CudaSource, fn: ts.Node, buf: SharedDecl) -> list[ts.Node]:
    """`T* p = &buf[E];` / `T* p = buf + E;` declarations of never-rebound, never address-taken p."""
    elem = " ".join(buf.element_type.split())
    rx = re.compile(rf"^(?:&{re.escape(buf.name)}\[.+\]|{re.escape(buf.name)}\+.+)$")
    out = []
    for n, ty, ptr, v in S.pointer_inits(fn):
        name = S.declarator_ident(ptr)
        if (
            name
            and " ".join(src.text_of(ty).split()) == elem
            and S.squash(src.text_of(ptr)).count("*") == 1
            and rx.match(S.squash(src.text_of(v)))
            and not S.writes_to(fn, name)
            and not any(
                p.type == "pointer_expression" and p.children[0].type == "&" and S.uses_ident(p, name)
                for p in S.walk(fn)
            )
        ):
            out.append(n)
    return out
