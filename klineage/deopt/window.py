"""Window reads: a load whose address moves with the counter of a short loop of compile-time trip
count over a window that starts before the thread's own position (a 3x3 pooling or stencil window
with a halo, tested against the lower edge). Neighbouring threads'
windows overlap, so each element is requested by several threads of a warp within a few
instructions: the plain global load path's L1 already serves that reuse, and an operator that only
reroutes loads (the read-only path of `__ldg`) has nothing left to buy there."""

from __future__ import annotations

import tree_sitter as ts

from klineage.deopt import _cexpr as X
from klineage.deopt.pragma_unroll import compile_time_bound
from klineage.source.model import CudaSource


def _counter(src: CudaSource, loop: ts.Node) -> str | None:
    """The counter of `for (int c = <literal>; c < <compile-time>; ++c)`: a fixed walk in unit steps."""
    init = loop.child_by_field_name("initializer")
    step = loop.child_by_field_name("update")
    if init is None or init.type != "declaration" or step is None:
        return None
    d = init.child_by_field_name("declarator")
    value = d.child_by_field_name("value") if d is not None else None
    name, _, _ = X.declarator_name(d.child_by_field_name("declarator") if d is not None else None)
    if not name or value is None or value.type != "number_literal":
        return None
    unit = {f"++{name}", f"{name}++", f"{name}+=1", f"{name}={name}+1"}
    if "".join(src.text_of(step).split()) not in unit:
        return None
    header = src.text_of(loop)[: (loop.child_by_field_name("body") or loop).start_byte - loop.start_byte]
    fn = X.enclosing(loop, "function_definition")
    params = X.identifiers(fn.child_by_field_name("declarator")) if fn is not None else set()
    return name if compile_time_bound(header, set(), frozenset(params)) else None


def _moved_by(src: CudaSource, loop: ts.Node, counter: str) -> set[str]:
    """The counter and the locals of the loop body computed from it (`h = oh * 2 - 1 + dh`)."""
    names = {counter}
    body = loop.child_by_field_name("body")
    decls = [n for n in X.walk(body)] if body is not None else []
    grew = True
    while grew:
        grew = False
        for n in decls:
            if n.type != "init_declarator":
                continue
            name, _, _ = X.declarator_name(n.child_by_field_name("declarator"))
            value = n.child_by_field_name("value")
            if name and name not in names and value is not None and X.identifiers(value) & names:
                names.add(name)
                grew = True
    return names


def _halo(src: CudaSource, loop: ts.Node, moved: set[str]) -> bool:
    """The loop tests a moved coordinate against the lower edge (`h < 0`): the window starts
    before the thread's own position, so it overlaps its neighbour's (a tile or a coarsened run,
    which start at the thread's own element, never need that test)."""
    body = loop.child_by_field_name("body")
    for n in X.walk(body) if body is not None else []:
        if n.type != "binary_expression":
            continue
        left, right = n.child_by_field_name("left"), n.child_by_field_name("right")
        op = "".join(src.text_of(n.child_by_field_name("operator")).split())
        sides = [(left, right), (right, left)]
        for var, zero in sides:
            if (
                var is not None
                and zero is not None
                and var.type == "identifier"
                and src.text_of(var) in moved
                and src.text_of(zero).strip() == "0"
                and op in ("<", ">=", ">", "<=")
            ):
                return True
    return False


def window_loop(src: CudaSource, read: ts.Node) -> ts.Node | None:
    """The enclosing loop of compile-time trip count whose counter moves `read`'s address, if any."""
    p = read.parent
    index = read.child_by_field_name("index") or read
    while p is not None and p.type != "function_definition":
        if p.type == "for_statement":
            counter = _counter(src, p)
            moved = _moved_by(src, p, counter) if counter else set()
            if X.identifiers(index) & moved and _halo(src, p, moved - {counter}):
                return p
        p = p.parent
    return None
