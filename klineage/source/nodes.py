"""Small questions about tree-sitter-cuda nodes shared by the model and the anchors."""

from __future__ import annotations

import tree_sitter as ts

FUNC_QUALIFIER_TOKENS = frozenset({"__global__", "__device__", "__host__", "__forceinline__", "__noinline__"})
LOOP_TYPES = frozenset({"for_statement", "for_range_loop", "while_statement", "do_statement"})
LOOP_KIND = {
    "for_statement": "for",
    "for_range_loop": "for",
    "while_statement": "while",
    "do_statement": "do",
}


def func_declarator(fn: ts.Node) -> ts.Node | None:
    """The function_declarator of a function_definition, under any pointer/reference wrappers."""
    d = fn.child_by_field_name("declarator")
    while d is not None and d.type != "function_declarator":
        d = d.child_by_field_name("declarator")
    return d


def func_name(fn: ts.Node) -> str:
    """Name of a function_definition (template arguments of a specialization dropped)."""
    d = func_declarator(fn)
    if d is None:
        return ""
    name = d.child_by_field_name("declarator")
    if name is None:
        return ""
    if name.type == "template_function":
        name = name.child_by_field_name("name") or name
    return _text(name)


def func_qualifiers(fn: ts.Node) -> tuple[str, ...]:
    """`__global__`, `__device__`, `static`, `inline`, ... written before the declarator."""
    out = []
    for c in fn.children:
        if c.type in FUNC_QUALIFIER_TOKENS or c.type in ("storage_class_specifier", "type_qualifier"):
            out.append(_text(c))
    return tuple(out)


def is_extern_c(node: ts.Node) -> bool:
    """True when the node sits inside `extern "C"` (a block or a single declaration)."""
    p = node.parent
    while p is not None:
        if p.type == "linkage_specification":
            v = p.child_by_field_name("value")
            if v is not None and _text(v) == '"C"':
                return True
        p = p.parent
    return False


def func_kind(fn: ts.Node) -> str:
    """kernel (`__global__`), device (`__device__`, incl. host+device), launcher (extern "C"), host."""
    quals = func_qualifiers(fn)
    if "__global__" in quals:
        return "kernel"
    if "__device__" in quals:
        return "device"
    if is_extern_c(fn):
        return "launcher"
    return "host"


def enclosing_function(node: ts.Node) -> ts.Node | None:
    """Nearest function_definition strictly above `node` (lambdas are looked through)."""
    p = node.parent
    while p is not None and p.type != "function_definition":
        p = p.parent
    return p


def callee(fn: ts.Node | None) -> tuple[str, tuple[ts.Node, ...]]:
    """Name of a called expression and its explicit template argument nodes."""
    if fn is None:
        return "", ()
    if fn.type in ("template_function", "template_method"):
        name = fn.child_by_field_name("name")
        args = fn.child_by_field_name("arguments")
        return _text(name) if name else "", tuple(args.named_children) if args else ()
    if fn.type == "qualified_identifier":
        scope = fn.child_by_field_name("scope")
        inner, targs = callee(fn.child_by_field_name("name"))
        return (f"{_text(scope)}::{inner}" if scope else inner), targs
    if fn.type == "field_expression":
        arg = fn.child_by_field_name("argument")
        op = fn.child_by_field_name("operator")
        inner, targs = callee(fn.child_by_field_name("field"))
        return f"{_text(arg) if arg else ''}{_text(op) if op else '.'}{inner}", targs
    return _text(fn), ()


def kernel_call_syntax(call: ts.Node) -> ts.Node | None:
    """The `<<<...>>>` child of a call_expression, if it is a kernel launch."""
    for c in call.children:
        if c.type == "kernel_call_syntax":
            return c
    return None


def walk(node: ts.Node):
    """All nodes under `node` (inclusive), in source order. A TreeCursor, not `children`: every
    `children` access builds a list of new Node objects, and the operators walk whole kernels at
    every walker step (this is ~2.5x faster and the walker's hottest loop)."""
    cur = node.walk()
    yield cur.node
    depth = 0
    while True:
        if cur.goto_first_child():
            depth += 1
            yield cur.node
            continue
        while True:
            if depth == 0:
                return
            if cur.goto_next_sibling():
                yield cur.node
                break
            cur.goto_parent()
            depth -= 1


def _text(node: ts.Node) -> str:
    return node.text.decode("utf-8", "replace") if node.text is not None else ""
