"""Build the construct records of a parsed file (kernels, launches, shared memory, loops, ...)."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

import tree_sitter as ts

from klineage.source import nodes as N
from klineage.source.constructs import (
    Call,
    Function,
    LaunchSite,
    Loop,
    Param,
    Pragma,
    SharedDecl,
    Template,
    TemplateParam,
)

if TYPE_CHECKING:
    from klineage.source.model import CudaSource

_WS = re.compile(r"\s+")
_RESTRICT = frozenset({"__restrict__", "__restrict", "restrict"})
_COMMENT_TYPES = frozenset({"comment"})
_ALIGNAS = re.compile(r"\balignas\s*\(([^()]*)\)")
_PRAGMA = re.compile(r"#\s*pragma\s+(\w*)\s*((?:(?!//|/\*).)*)")


def _squash(text: str) -> str:
    return _WS.sub(" ", text).strip()


def _base(src: CudaSource, node: ts.Node) -> dict:
    return {
        "node_type": node.type,
        "start": node.start_byte,
        "end": node.end_byte,
        "line": node.start_point.row + 1,
        "end_line": node.end_point.row + 1,
    }


def _fn_name(node: ts.Node) -> str | None:
    fn = N.enclosing_function(node)
    return N.func_name(fn) if fn is not None else None


def _named(node: ts.Node | None) -> list[ts.Node]:
    return [c for c in node.named_children if c.type not in _COMMENT_TYPES] if node else []


# --- parameters -------------------------------------------------------------------------------


def _innermost_name(decl: ts.Node | None) -> ts.Node | None:
    while decl is not None and decl.type not in ("identifier", "field_identifier"):
        nxt = decl.child_by_field_name("declarator")
        if nxt is None:
            return None
        decl = nxt
    return decl


def param(src: CudaSource, p: ts.Node) -> Param:
    """A parameter_declaration (or optional/variadic one) as a Param."""
    decl = p.child_by_field_name("declarator")
    name_node = _innermost_name(decl)
    default = p.child_by_field_name("default_value")
    end = default.start_byte if default is not None else p.end_byte
    data = src.text_bytes
    if name_node is not None:
        raw = data[p.start_byte : name_node.start_byte] + data[name_node.end_byte : end]
    else:
        raw = data[p.start_byte : end]
    type_text = _squash(raw.decode("utf-8").rstrip().rstrip("="))
    kinds = {n.type for n in N.walk(p)}
    quals = [src.text_of(c) for c in p.children if c.type == "type_qualifier"]
    restrict = any(src.text_of(n) in _RESTRICT for n in N.walk(p) if n.type == "type_qualifier")
    type_node = p.child_by_field_name("type")
    east_const = type_node is not None and src.text_of(type_node).startswith("const ")
    return Param(
        name=src.text_of(name_node) if name_node is not None else "",
        type=type_text,
        is_pointer=bool(kinds & {"pointer_declarator", "abstract_pointer_declarator", "array_declarator"}),
        has_restrict=restrict,
        is_const="const" in quals or east_const,
        default=src.text_of(default) if default is not None else None,
    )


def params_of(src: CudaSource, fn: ts.Node) -> tuple[Param, ...]:
    d = N.func_declarator(fn)
    plist = d.child_by_field_name("parameters") if d is not None else None
    return tuple(param(src, p) for p in _named(plist) if p.type.endswith("parameter_declaration"))


def template_params(src: CudaSource, tmpl: ts.Node | None) -> tuple[TemplateParam, ...]:
    """The parameters of a template_declaration, in order."""
    if tmpl is None:
        return ()
    plist = tmpl.child_by_field_name("parameters")
    out = []
    for p in _named(plist):
        default = p.child_by_field_name("default_value") or p.child_by_field_name("default_type")
        dtext = src.text_of(default) if default is not None else None
        if p.type in (
            "type_parameter_declaration",
            "optional_type_parameter_declaration",
            "variadic_type_parameter_declaration",
        ):
            name = p.child_by_field_name("name")
            if name is None:
                ids = [c for c in p.named_children if c.type == "type_identifier"]
                name = ids[0] if ids else None
            kw = p.children[0].type if p.children else "typename"
            out.append(TemplateParam(src.text_of(name) if name else "", "type", kw, dtext))
        elif p.type == "template_template_parameter_declaration":
            out.append(TemplateParam(_squash(src.text_of(p)), "template", "template", None))
        else:
            prm = param(src, p)
            out.append(TemplateParam(prm.name, "value", prm.type, dtext))
    return tuple(out)


# --- functions --------------------------------------------------------------------------------


def _template_of(fn: ts.Node) -> ts.Node | None:
    p = fn.parent
    return p if p is not None and p.type == "template_declaration" else None


def function(src: CudaSource, fn: ts.Node) -> Function:
    type_node = fn.child_by_field_name("type")
    body = fn.child_by_field_name("body")
    decl = N.func_declarator(fn)
    attrs = src.attributes_in(fn.start_byte, decl.start_byte if decl is not None else fn.end_byte)
    lb = next((a.args for a in attrs if a.name == "__launch_bounds__"), ())
    tmpl = _template_of(fn)
    return Function(
        name=N.func_name(fn),
        kind=N.func_kind(fn),
        **_base(src, fn),
        qualifiers=N.func_qualifiers(fn),
        return_type=src.text_of(type_node) if type_node is not None else "",
        params=params_of(src, fn),
        launch_bounds=lb,
        attributes=attrs,
        template_params=template_params(src, tmpl),
        is_extern_c=N.is_extern_c(fn),
        body_start=body.start_byte if body is not None else fn.end_byte,
        body_end=body.end_byte if body is not None else fn.end_byte,
    )


def functions(src: CudaSource) -> tuple[Function, ...]:
    return tuple(function(src, n) for n in src.nodes_of_type("function_definition"))


def templates(src: CudaSource) -> tuple[Template, ...]:
    out = []
    for t in src.nodes_of_type("template_declaration"):
        inner = next(
            (c for c in t.named_children if c.type not in ("template_parameter_list", "comment")), None
        )
        if inner is None:
            continue
        if inner.type == "function_definition":
            name, kind = N.func_name(inner), N.func_kind(inner)
        elif inner.type in ("struct_specifier", "class_specifier", "union_specifier"):
            nm = inner.child_by_field_name("name")
            name, kind = (src.text_of(nm) if nm else ""), inner.type.split("_")[0]
        else:
            name, kind = _squash(src.text_of(inner))[:40], inner.type
        out.append(Template(name=name, kind=kind, **_base(src, t), params=template_params(src, t)))
    return tuple(out)


# --- launches and calls -----------------------------------------------------------------------


def launch_sites(src: CudaSource) -> tuple[LaunchSite, ...]:
    out = []
    for call in src.nodes_of_type("call_expression"):
        kcs = N.kernel_call_syntax(call)
        if kcs is None:
            continue
        name, targs = N.callee(call.child_by_field_name("function"))
        out.append(
            LaunchSite(
                name=name,
                kind="launch",
                **_base(src, call),
                template_args=tuple(_squash(src.text_of(a)) for a in targs),
                config=tuple(_squash(src.text_of(a)) for a in _named(kcs)),
                args=tuple(_squash(src.text_of(a)) for a in _named(call.child_by_field_name("arguments"))),
                function=_fn_name(call),
            )
        )
    return tuple(out)


def calls(src: CudaSource, pattern: str) -> tuple[Call, ...]:
    rx = re.compile(pattern)
    out = []
    for call in src.nodes_of_type("call_expression"):
        if N.kernel_call_syntax(call) is not None:
            continue
        name, targs = N.callee(call.child_by_field_name("function"))
        if not rx.fullmatch(name):
            continue
        out.append(
            Call(
                name=name,
                kind="call",
                **_base(src, call),
                template_args=tuple(_squash(src.text_of(a)) for a in targs),
                args=tuple(_squash(src.text_of(a)) for a in _named(call.child_by_field_name("arguments"))),
                function=_fn_name(call),
            )
        )
    return tuple(out)


# --- shared memory ----------------------------------------------------------------------------


def _dims(decl: ts.Node) -> tuple[str, ...]:
    dims = []
    while decl is not None and decl.type == "array_declarator":
        size = decl.child_by_field_name("size")
        dims.append(size)
        decl = decl.child_by_field_name("declarator")
    return tuple(dims[::-1])


def shared_decls(src: CudaSource) -> tuple[SharedDecl, ...]:
    out = []
    for d in src.nodes_of_type("declaration", "field_declaration"):
        quals = [src.text_of(c) for c in d.children if c.type == "type_qualifier"]
        if "__shared__" not in quals:
            continue
        storage = [src.text_of(c) for c in d.children if c.type == "storage_class_specifier"]
        type_node = d.child_by_field_name("type")
        align = next(
            (
                a.args[0]
                for a in src.attributes_in(d.start_byte, d.end_byte)
                if a.name == "__align__" and a.args
            ),
            None,
        )
        if align is None and (m := _ALIGNAS.search(src.text_of(d))):
            align = m.group(1).strip()
        for decl in d.children_by_field_name("declarator"):
            target = decl.child_by_field_name("declarator") if decl.type == "init_declarator" else decl
            name_node = _innermost_name(target)
            dims = _dims(target)
            out.append(
                SharedDecl(
                    name=src.text_of(name_node) if name_node is not None else "",
                    kind="shared",
                    **_base(src, d),
                    element_type=_squash(src.text_of(type_node)) if type_node is not None else "",
                    dims=tuple(_squash(src.text_of(s)) if s is not None else "" for s in dims),
                    is_extern="extern" in storage,
                    align=align,
                    function=_fn_name(d),
                    declarator_start=decl.start_byte,
                    declarator_end=decl.end_byte,
                )
            )
    return tuple(out)


# --- loops and pragmas ------------------------------------------------------------------------


def loop(src: CudaSource, node: ts.Node) -> Loop:
    body = node.child_by_field_name("body")
    depth = 0
    p = node.parent
    while p is not None and p.type != "function_definition":
        depth += p.type in N.LOOP_TYPES
        p = p.parent
    if node.type == "do_statement":
        header = "do"
    else:
        prev = body.prev_sibling if body is not None else None
        while prev is not None and prev.type == "comment":
            prev = prev.prev_sibling
        header = _squash(src.text_bytes[node.start_byte : prev.end_byte].decode()) if prev else ""
    return Loop(
        name=N.LOOP_KIND[node.type],
        kind="loop",
        **_base(src, node),
        header=header,
        function=_fn_name(node),
        depth=depth,
        body_start=body.start_byte if body else node.end_byte,
        body_end=body.end_byte if body else node.end_byte,
    )


def loops(src: CudaSource) -> tuple[Loop, ...]:
    return tuple(loop(src, n) for n in src.nodes_of_type(*N.LOOP_TYPES))


def _loop_after(src: CudaSource, pos: int) -> ts.Node | None:
    """The loop that is the first statement at or after byte `pos`, looking past comments and blanks."""
    data, root = src.parse_bytes, src.tree.root_node
    while True:
        while pos < len(data) and data[pos : pos + 1].isspace():
            pos += 1
        if pos >= len(data):
            return None
        node = root.descendant_for_byte_range(pos, pos)
        if node is None:
            return None
        if node.type == "comment":
            pos = node.end_byte
            continue
        best = None
        while node is not None and node.start_byte == pos:
            if node.type in N.LOOP_TYPES:
                best = node
            node = node.parent
        return best


def pragmas(src: CudaSource) -> tuple[Pragma, ...]:
    out = []
    root = src.tree.root_node
    for start, end in src.pragma_spans:
        inside = root.descendant_for_byte_range(start, start)
        if inside is not None and inside.type in (
            "comment",
            "string_literal",
            "raw_string_literal",
            "string_content",
            "raw_string_content",
        ):
            continue
        text = src.text_bytes[start:end].decode()
        m = _PRAGMA.match(text)
        name, value = (m.group(1), m.group(2).strip()) if m else ("", "")
        if value.startswith("(") and value.endswith(")"):
            value = value[1:-1].strip()
        target = _loop_after(src, end)
        container = root.descendant_for_byte_range(start, end)
        fn = (
            container
            if container is not None and container.type == "function_definition"
            else (N.enclosing_function(container) if container is not None else None)
        )
        out.append(
            Pragma(
                name=name,
                kind="pragma",
                node_type="pragma",
                start=start,
                end=end,
                line=src.line_of(start),
                end_line=src.line_of(end),
                value=value or None,
                text=text,
                loop=loop(src, target) if target is not None else None,
                function=N.func_name(fn) if fn is not None else None,
            )
        )
    return tuple(out)
