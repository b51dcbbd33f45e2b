"""Loop temporaries declared at the loop that uses them.

A local declared without an initializer ahead of a loop (`float m, s, t;`), used only inside that
loop's body and assigned there, at the body's top level, before any other use (`t = fmaxf(m, x);`),
holds nothing from one iteration to the next: every iteration writes it before reading it. It reads
as a declaration at that assignment (`float t = fmaxf(m, x);`), and leaves the outer declaration.
The loop operators read a temporary of the body as the body's own (online softmax's running-max
update is `T mn = max(m, x)` in the loop; llm.c writes `bigger = fmaxf(maxval, x[i])` against an
outer `bigger`).

Left alone: a name declared twice in the function, one with an initializer, an array, pointer or
`__shared__`/`static` declaration, one whose address is taken, one used in the loop's header or
outside the loop, and one whose first use in the body is not a plain `v = E` statement at the
body's top level (E not reading v), which may keep a value across iterations.
"""

from __future__ import annotations

import tree_sitter as ts

from klineage.source import edit
from klineage.source import syntax as S
from klineage.source.canon.base import Rule
from klineage.source.edit import Edit
from klineage.source.model import CudaSource

_LOOPS = ("for_statement", "while_statement", "do_statement")
#: declaration children that make a local more than a plain value (storage, address space)
_SPECIFIERS = (b"__shared__", b"static", b"extern", b"register", b"__device__", b"__constant__")


class LoopLocalTemporary(Rule):
    name = "loop_local_temporary"
    summary = "a temporary written first in each iteration is declared in the loop body"

    def edits(self, src: CudaSource) -> list[Edit]:
        out: list[Edit] = []
        for f in src.functions:
            if f.kind in ("kernel", "device"):
                fn = src.node_for(f)
                for decl in (n for n in S.walk(fn) if n.type == "declaration"):
                    out += _declaration_edits(src, fn, decl)
        return out


def _declaration_edits(src: CudaSource, fn: ts.Node, decl: ts.Node) -> list[Edit]:
    """The moves of every movable declarator of `decl`: the declarators leave it (the whole
    statement when none is left; its line stays, empty) and each first assignment declares."""
    ty = decl.child_by_field_name("type")
    if ty is None or any(c.text in _SPECIFIERS for c in decl.children):
        return []
    head = " ".join(src.text_of(decl)[: ty.end_byte - decl.start_byte].split())
    decls = decl.children_by_field_name("declarator")
    moves = [(d, a) for d in decls if (a := _first_assignment(src, fn, decl, d)) is not None]
    if not moves:
        return []
    out = [edit.replace(a, f"{head} {src.text_of(a)}") for _, a in moves]
    if len(moves) == len(decls):
        return [edit.replace(decl, ""), *out]
    kept = [src.text_of(d) for d in decls if all(d != m for m, _ in moves)]
    first, last = decls[0], decls[-1]
    return [edit.Edit(first.start_byte, last.end_byte, ", ".join(kept)), *out]


def _first_assignment(src: CudaSource, fn: ts.Node, decl: ts.Node, d: ts.Node) -> ts.Node | None:
    """The `v = E` expression (the statement's expression) where `d`'s variable moves to, or None."""
    if d.type != "identifier" or not d.text:
        return None
    name = d.text.decode()
    if _declared_count(fn, name) != 1:
        return None
    uses = [n for n in S.walk(fn) if n.type == "identifier" and n.text == d.text and n != d]
    if not uses or any(u.start_byte < decl.end_byte for u in uses) or any(_address_taken(u) for u in uses):
        return None
    loop = _enclosing_loop(uses)
    body = loop.child_by_field_name("body") if loop is not None else None
    if body is None or body.type != "compound_statement" or not all(_inside(u, body) for u in uses):
        return None
    first = next((s for s in body.named_children if S.uses_ident(s, name)), None)
    if first is None or first.type != "expression_statement" or not first.named_children:
        return None
    a = first.named_children[0]
    left, right = a.child_by_field_name("left"), a.child_by_field_name("right")
    if (
        a.type != "assignment_expression"
        or src.text_of(a.children[1]) != "="
        or left is None
        or left.text != d.text
        or right is None
        or S.uses_ident(right, name)
    ):
        return None
    return a


def _enclosing_loop(uses: list[ts.Node]) -> ts.Node | None:
    """The innermost loop around every use."""
    loops = [a for a in S.ancestors(uses[0]) if a.type in _LOOPS]
    return next((lp for lp in loops if all(_inside(u, lp) for u in uses)), None)


def _inside(n: ts.Node, outer: ts.Node) -> bool:
    return outer.start_byte <= n.start_byte and n.end_byte <= outer.end_byte


def _address_taken(use: ts.Node) -> bool:
    p = use.parent
    return p is not None and p.type == "pointer_expression" and p.children[0].type == "&"


def _declared_count(fn: ts.Node, name: str) -> int:
    return sum(
        1
        for n in S.walk(fn)
        if n.type in ("declaration", "parameter_declaration")
        for d in n.children_by_field_name("declarator")
        if S.declarator_ident(d) == name
    )
