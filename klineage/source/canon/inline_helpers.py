"""Shared-memory staging helpers inlined: a `void` device function through which a kernel copies
global memory into one of its `__shared__` arrays (`load_tile<T, BM, BK>(A, lda, a_smem, ...)`:
the helper writes the array's elements and reads a pointer the kernel was given) becomes a block
in place of the call, and the helper goes.

The staging operators (smem_staging, gemm_tiling's removal) read a kernel's global loads and
shared stores in the kernel's own body; a copy hidden behind a call is invisible to them. The
block binds the helper's parameters to the call's arguments: a name argument renames the
parameter inside the body (an array argument must be a name), any other argument becomes a local
initialised with it; a template parameter becomes the given template argument the same way
(`using` for a type, `constexpr` for a value; a default fills an omitted one).

Left alone: a helper with a `return`, one that calls itself, one the file names anywhere but in
such calls (a declaration, a pointer, another kind of call), a call whose arguments are deduced
or do not match the parameters one to one, and a body that declares a name an argument reads
(the block would capture it).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import tree_sitter as ts

from klineage.source import nodes as N
from klineage.source import syntax as S
from klineage.source.canon.base import Rule
from klineage.source.constructs import Function
from klineage.source.edit import Edit
from klineage.source.model import CudaSource


class _NotInlinable(Exception):
    """The call or the helper is outside what the rule rewrites; the rule leaves it alone."""


@dataclass(frozen=True)
class _Binding:
    """One parameter of the helper and what the call gives it."""

    name: str
    arg: str
    #: the declaration to write when the argument is not a name (`None`: rename instead)
    decl: str | None


class InlineStagingHelper(Rule):
    name = "inline_staging_helper"
    summary = "a void device helper a kernel calls with a __shared__ array is inlined as a block"

    def edits(self, src: CudaSource) -> list[Edit]:
        out: list[Edit] = []
        for helper in src.device_functions:
            try:
                out += self._helper(src, helper)
            except _NotInlinable:
                continue
        return out

    def _helper(self, src: CudaSource, helper: Function) -> list[Edit]:
        fn = src.node_for(helper)
        body = fn.child_by_field_name("body")
        if helper.return_type.strip() != "void" or body is None:
            return []
        if any(n.type == "return_statement" for n in S.walk(body)) or S.calls_named(body, helper.name):
            return []
        calls = _calls_from_kernels(src, helper.name)
        tmpl = fn.parent if fn.parent is not None and fn.parent.type == "template_declaration" else fn
        mentions = [
            n
            for n in S.walk(src.tree.root_node)
            if n.type == "identifier"
            and src.text_of(n) == helper.name
            and not tmpl.start_byte <= n.start_byte < tmpl.end_byte
        ]
        if not calls or len(mentions) != len(calls) or not all(_stages(src, helper, c) for c in calls):
            return []
        edits = [Edit(c.parent.start_byte, c.parent.end_byte, _block(src, helper, fn, c)) for c in calls]
        return [*edits, Edit(_doc_start(src, tmpl), tmpl.end_byte, "")]


def _doc_start(src: CudaSource, node: ts.Node) -> int:
    """Where the comment lines right above `node` (its documentation) begin: they go with it."""
    start, prev = node.start_byte, node.prev_sibling
    while prev is not None and prev.type == "comment" and not src.text_of((prev.end_byte, start)).strip():
        if src.text_of((prev.end_byte, start)).count("\n") > 1:
            break
        start, prev = prev.start_byte, prev.prev_sibling
    return start


def _calls_from_kernels(src: CudaSource, name: str) -> list[ts.Node]:
    """Calls of `name` that are whole expression statements in a kernel's body."""
    out: list[ts.Node] = []
    for k in src.kernels:
        for c in S.calls_named(src.node_for(k), name):
            if c.parent is None or c.parent.type != "expression_statement":
                raise _NotInlinable(f"{name} is called inside an expression")
            out.append(c)
    return out


def _stages(src: CudaSource, helper: Function, call: ts.Node) -> bool:
    """The call copies global memory into shared memory: the helper writes (element-wise) the
    parameter given one of the kernel's `__shared__` arrays, and another parameter is given one
    of the kernel's pointer parameters (or an offset from one)."""
    k = N.enclosing_function(call)
    if k is None:
        return False
    shared = {d.name for d in src.shared_decls if k.start_byte <= d.start < k.end_byte}
    kernel = next((f for f in src.kernels if f.start == k.start_byte), None)
    pointers = {p.name for p in kernel.params if p.is_pointer} if kernel is not None else set()
    args = [src.text_of(a).strip() for a in S.call_args(call)]
    if len(args) != len(helper.params):
        return False
    body = src.node_for(helper).child_by_field_name("body")
    written = S.written_names(body, through_access=True)
    staged = any(a in shared and p.name in written for p, a in zip(helper.params, args, strict=True))
    global_read = any(
        (_names(a) & pointers) and p.is_pointer and p.name not in written
        for p, a in zip(helper.params, args, strict=True)
    )
    return staged and global_read


def _block(src: CudaSource, helper: Function, fn: ts.Node, call: ts.Node) -> str:
    """The helper's body as a block bound to this call's arguments."""
    binds = _bindings(src, helper, fn, call)
    body = fn.child_by_field_name("body")
    renames = {b.name: b.arg for b in binds if b.decl is None}
    declared = set(S.local_decls(body)) | {b.name for b in binds if b.decl is not None}
    read = {n for b in binds for n in _names(b.arg)}
    if declared & read or set(S.local_decls(body)) & set(renames):
        raise _NotInlinable("the inlined body would capture an argument")
    edits = [
        (n.start_byte, n.end_byte, renames[src.text_of(n)])
        for n in S.walk(body)
        if n.type in ("identifier", "type_identifier") and src.text_of(n) in renames and not _qualified(n)
    ]
    text = src.text_of(body)
    for start, end, new in sorted(edits, reverse=True):
        text = text[: start - body.start_byte] + new + text[end - body.start_byte :]
    decls = "".join(f"\n    {b.decl}" for b in binds if b.decl is not None)
    indent = " " * call.parent.start_point[1]
    return ("{" + decls + text[1:]).replace("\n", "\n" + indent)


def _bindings(src: CudaSource, helper: Function, fn: ts.Node, call: ts.Node) -> list[_Binding]:
    _, targs = N.callee(call.child_by_field_name("function"))
    targ_texts = [src.text_of(t) for t in targs if t.type != "comment"]
    out: list[_Binding] = []
    if len(targ_texts) > len(helper.template_params):
        raise _NotInlinable("more template arguments than parameters")
    for i, tp in enumerate(helper.template_params):
        arg = targ_texts[i] if i < len(targ_texts) else tp.default
        if arg is None or tp.kind not in ("type", "value"):
            raise _NotInlinable(f"template parameter {tp.name} is deduced")
        if i >= len(targ_texts):  # a default reads the parameters before it, as the call bound them
            arg = S.subst_idents(arg, {b.name: S.paren(b.arg) for b in out})
        decl = f"using {tp.name} = {arg};" if tp.kind == "type" else f"constexpr {tp.type} {tp.name} = {arg};"
        out.append(_bind(tp.name, arg.strip(), decl))
    args = [src.text_of(a) for a in S.call_args(call)]
    if len(args) != len(helper.params):
        raise _NotInlinable("arguments and parameters differ in number")
    for p, arg, node in zip(helper.params, args, S.param_nodes(fn), strict=True):
        array = any(c.type == "array_declarator" for c in S.walk(node))
        if array and not arg.strip().isidentifier():
            raise _NotInlinable(f"array parameter {p.name} given an expression")
        out.append(_bind(p.name, arg.strip(), f"{src.text_of(node)} = ({arg});"))
    names = {b.name for b in out}
    if any(_names(b.arg) & names for b in out if b.decl is not None):
        raise _NotInlinable("an argument reads a parameter's name")
    return out


def _bind(name: str, arg: str, decl: str) -> _Binding:
    return _Binding(name, arg, None if arg.isidentifier() else decl)


def _names(text: str) -> set[str]:
    return set(re.findall(r"(?<![\w.])(?<!->)[A-Za-z_]\w*", text))


def _qualified(n: ts.Node) -> bool:
    """`n` is the name after a scope (`ns::n`), not the parameter."""
    p = n.parent
    return p is not None and p.type == "qualified_identifier" and p.child_by_field_name("name") == n
