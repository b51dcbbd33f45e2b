"""`__restrict__` on a kernel's pointer parameters: the promise that they do not alias, which lets
the compiler keep loaded values in registers and route reads through the read-only path."""

from __future__ import annotations

import tree_sitter as ts

from klineage.deopt.base import Operator, Precondition, Site
from klineage.source import edit
from klineage.source.model import CudaSource

_RESTRICT = {"__restrict__", "__restrict"}


def _restrict_nodes(src: CudaSource, fn_node: ts.Node) -> list[ts.Node]:
    decl = next((c for c in fn_node.children if c.type == "function_declarator"), None)
    params = decl.child_by_field_name("parameters") if decl else None
    if params is None:
        return []
    found = []
    stack = list(params.children)
    while stack:
        n = stack.pop()
        if n.type in ("type_qualifier", "ms_pointer_modifier") and src.text_of(n).strip() in _RESTRICT:
            found.append(n)
        else:
            stack.extend(n.children)
    return sorted(found, key=lambda n: n.start_byte)


def _pointer_declarators(fn_node: ts.Node) -> list[ts.Node]:
    decl = next((c for c in fn_node.children if c.type == "function_declarator"), None)
    params = decl.child_by_field_name("parameters") if decl else None
    out = []
    for p in params.children if params else ():
        if p.type == "parameter_declaration":
            d = p.child_by_field_name("declarator")
            if d is not None and d.type == "pointer_declarator":
                out.append(d)
    return out


class Restrict(Operator):
    name = "restrict"
    category = "tuning"
    intent = "Mark a kernel's pointer parameters __restrict__ so loads can be cached in registers and served by the read-only path."
    mechanical_apply = True

    def find(self, src: CudaSource) -> list[Site]:
        sites = []
        for k in src.kernels:
            node = src.node_for(k)
            quals = _restrict_nodes(src, node)
            if quals:
                sites.append(
                    self.site(
                        src, node, f"{len(quals)} __restrict__ pointer(s) on kernel {k.name}", kernel=k.name
                    )
                )
        return sites

    def _remove(self, src: CudaSource, site: Site) -> CudaSource:
        node = src.node_at(site.anchor)
        assert node is not None
        edits = []
        for q in _restrict_nodes(src, node):
            end = q.end_byte
            if src.text_bytes[end : end + 1] == b" ":
                end += 1
            edits.append(edit.Edit(q.start_byte, end, ""))
        return edit.apply_edits(src, edits)

    def find_forward(self, src: CudaSource) -> list[Site]:
        sites = []
        for k in src.kernels:
            node = src.node_for(k)
            if not _restrict_nodes(src, node) and _pointer_declarators(node):
                sites.append(
                    self.site(
                        src,
                        node,
                        f"pointer parameters of kernel {k.name} could be __restrict__",
                        kernel=k.name,
                    )
                )
        return sites

    def preconditions(self, src: CudaSource, site: Site) -> list[Precondition]:
        kernel = site.details.get("kernel", "")
        facts = []
        pointer_params = [p.name for k in src.kernels if k.name == kernel for p in k.params if p.is_pointer]
        for launch in src.launch_sites:
            if launch.name != kernel or len(launch.args) < len(pointer_params):
                continue
            k = next(k for k in src.kernels if k.name == kernel)
            ptr_args = [a.strip() for a, p in zip(launch.args, k.params, strict=False) if p.is_pointer]
            dup = sorted({a for a in ptr_args if ptr_args.count(a) > 1})
            facts.append(
                Precondition(
                    "no_alias_at_launch",
                    not dup,
                    f"launch at line {launch.line} passes {', '.join(dup)} to two pointer parameters"
                    if dup
                    else f"launch at line {launch.line} passes distinct pointers",
                )
            )
        if not facts:
            facts.append(
                Precondition("no_alias_at_launch", True, "no launch in this file passes one pointer twice")
            )
        return facts

    def _apply(self, src: CudaSource, site: Site) -> CudaSource:
        node = src.node_at(site.anchor)
        assert node is not None
        edits = []
        for d in _pointer_declarators(node):
            star = d.children[0]
            edits.append(edit.Edit(star.end_byte, star.end_byte, " __restrict__ "))
        return edit.apply_edits(src, edits)
