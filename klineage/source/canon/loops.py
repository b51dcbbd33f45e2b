"""Loops with a visible induction variable, bound and stride.

`while (i < n) { ...; i += s; }` becomes `for (...; i < n; i += s) { ... }`, taking in the
declaration of `i` right before it when nothing after the loop reads `i`; a stride computed before
the loop from launch-uniform values (`gridSize = blockDim.x * gridDim.x`) is written into the
update, where the operators read a grid-stride or a strided loop.
"""

from __future__ import annotations

import re

import tree_sitter as ts

from klineage.source import edit
from klineage.source import syntax as S
from klineage.source.canon.base import Rule
from klineage.source.edit import Edit
from klineage.source.model import CudaSource

#: names whose value is the same in every thread of a launch (a stride made of them is uniform)
UNIFORM_BUILTINS = frozenset({"gridDim", "blockDim", "warpSize"})
_IDENT = re.compile(r"(?<![\w.])(?<!->)([A-Za-z_]\w*)(?!\w)")


def _update_of(src: CudaSource, stmt: ts.Node) -> tuple[str, str] | None:
    """(variable, canonical update text) of `i++`, `++i`, `i += s` or `i = i + s`."""
    if stmt.type != "expression_statement" or not stmt.named_children:
        return None
    e = stmt.named_children[0]
    t = S.squash(src.text_of(e))
    if m := re.fullmatch(r"(?:\+\+(\w+)|(\w+)\+\+)", t):
        v = m.group(1) or m.group(2)
        return v, f"++{v}"
    if e.type == "assignment_expression":
        left, right = e.child_by_field_name("left"), e.child_by_field_name("right")
        op = e.child_by_field_name("operator")
        if left is None or right is None or left.type != "identifier" or op is None:
            return None
        v = src.text_of(left)
        if op.type == "+=":
            return v, f"{v} += {src.text_of(right)}"
        if op.type == "=" and right.type == "binary_expression":
            rl, rr = right.child_by_field_name("left"), right.child_by_field_name("right")
            rop = right.child_by_field_name("operator")
            if (
                rop is not None
                and rop.type == "+"
                and rl is not None
                and rr is not None
                and src.text_of(rl) == v
            ):
                return v, f"{v} += {src.text_of(rr)}"
    return None


def _cond_var(src: CudaSource, cond: ts.Node) -> str | None:
    """The variable a loop condition bounds: `i < n`, `i <= n`, `i != n`."""
    while cond.type in ("condition_clause", "parenthesized_expression") and cond.named_children:
        cond = cond.child_by_field_name("value") or cond.named_children[0]
    if cond.type != "binary_expression":
        return None
    op = cond.child_by_field_name("operator")
    left = cond.child_by_field_name("left")
    if op is None or op.type not in ("<", "<=", "!=") or left is None or left.type != "identifier":
        return None
    return src.text_of(left)


def _continues(loop: ts.Node) -> bool:
    return any(n.type == "continue_statement" and S.bound_loop(n) == loop for n in S.walk(loop))


def _used_after(block: ts.Node, stmt: ts.Node, name: str) -> bool:
    return any(s.start_byte > stmt.start_byte and S.uses_ident(s, name) for s in block.named_children)


def _movable_decl(src: CudaSource, loop: ts.Node, var: str) -> ts.Node | None:
    """The declaration of `var` earlier in the loop's block, when it can move into the loop's
    initializer: one declarator with a call-free initializer, nothing between it and the loop
    touches `var` or writes a name the initializer reads, and nothing after the loop reads `var`."""
    block = loop.parent
    if block is None or block.type != "compound_statement" or _used_after(block, loop, var):
        return None
    between: list[ts.Node] = []
    p = loop.prev_named_sibling
    while p is not None:
        if p.type == "declaration" and S.decl_name(p) == var:
            ds = p.children_by_field_name("declarator")
            value = (
                ds[0].child_by_field_name("value")
                if len(ds) == 1 and ds[0].type == "init_declarator"
                else None
            )
            if value is None or S.has_call(value, r".*"):
                return None
            reads = {src.text_of(n) for n in S.walk(value) if n.type == "identifier"}
            loads = any(
                n.type in ("subscript_expression", "pointer_expression", "field_expression")
                and not S.squash(src.text_of(n)).startswith(("blockIdx", "threadIdx", "blockDim", "gridDim"))
                for n in S.walk(value)
            )
            if any(S.assigned_in(b) & reads for b in between) or (loads and between):
                return None
            return p
        if S.uses_ident(p, var):
            return None
        between.append(p)
        p = p.prev_named_sibling
    return None


class WhileToFor(Rule):
    name = "while_to_for"
    summary = "a while loop whose last statement steps its bounded variable becomes a counting for loop"

    def edits(self, src: CudaSource) -> list[Edit]:
        out: list[Edit] = []
        taken: list[tuple[int, int]] = []
        for loop in src.nodes_of_type("while_statement"):
            es = self._edit(src, loop)
            if es is not None and not any(a < e.end and e.start < b for e in es for a, b in taken):
                out += es
                taken += [(e.start, e.end) for e in es]
        return out

    def _edit(self, src: CudaSource, loop: ts.Node) -> list[Edit] | None:
        cond, body = loop.child_by_field_name("condition"), loop.child_by_field_name("body")
        if cond is None or body is None or body.type != "compound_statement" or _continues(loop):
            return None
        var = _cond_var(src, cond)
        stmts = S.named(body)
        if var is None or len(stmts) < 2:
            return None
        upd = _update_of(src, stmts[-1])
        if upd is None or upd[0] != var:
            return None
        if any(var in S.assigned_in(s) for s in stmts[:-1]) or S.assigned_in(cond) or S.has_call(cond, r".*"):
            return None
        value = cond.child_by_field_name("value") or cond.named_children[0]
        init, start = "; ", loop.start_byte
        decl = _movable_decl(src, loop, var)
        extra: list[Edit] = []
        if decl is not None:
            init = src.text_of(decl) + " "
            if decl.next_named_sibling == loop:
                start = decl.start_byte
            else:
                extra.append(edit.delete(src, decl))
        last = stmts[-1]
        a, b = edit.lines_of(src, last)
        if src.text_bytes[a : last.start_byte].strip() or src.text_bytes[last.end_byte : b].strip():
            a, b = last.start_byte, last.end_byte
        inner = (src.text_bytes[body.start_byte : a] + src.text_bytes[b : body.end_byte]).decode()
        text = f"for ({init}{src.text_of(value)}; {upd[1]}) {inner}"
        return [Edit(start, loop.end_byte, text), *extra]


class InlineStride(Rule):
    name = "inline_stride"
    summary = "a loop stride computed before the loop from launch-uniform values is written into the update"

    def edits(self, src: CudaSource) -> list[Edit]:
        out: list[Edit] = []
        uses: dict[tuple[int, str], list[ts.Node]] = {}
        for loop in src.nodes_of_type("for_statement"):
            upd = loop.child_by_field_name("update")
            fn = S.fn_node_of(loop)
            if upd is None or fn is None or upd.type != "assignment_expression":
                continue
            op, right = upd.child_by_field_name("operator"), upd.child_by_field_name("right")
            if op is None or op.type != "+=" or right is None or right.type != "identifier":
                continue
            uses.setdefault((fn.start_byte, src.text_of(right)), []).append(right)
        for (_, name), rights in uses.items():
            fn = S.fn_node_of(rights[0])
            assert fn is not None
            init = S.init_text(src, fn, name)
            if init is None or not self._uniform(src, fn, init):
                continue
            out += [edit.replace(r, init.strip()) for r in rights]
            reads = [
                n
                for n in S.walk(fn)
                if n.type == "identifier"
                and src.text_of(n) == name
                and n.parent is not None
                and n.parent.type != "init_declarator"
            ]
            decl = S.local_decls(fn).get(name)
            if (
                len(reads) == len(rights)
                and decl is not None
                and decl.parent is not None
                and len(decl.parent.children_by_field_name("declarator")) == 1
            ):
                out.append(edit.delete(src, decl.parent))
        return out

    @staticmethod
    def _uniform(src: CudaSource, fn: ts.Node, text: str) -> bool:
        """Launch-uniform: built from gridDim/blockDim, never-assigned parameters, template
        parameters and file constants (no thread index, no local the threads compute)."""
        if re.search(r"\b(threadIdx|blockIdx)\b", text) or re.search(r"\w\s*\(", text):
            return False
        params = param_names(fn)
        consts = S.file_constants(src)
        assigned = S.assigned_in(fn)
        for nm in _IDENT.findall(text):
            if (
                nm in UNIFORM_BUILTINS
                or nm in consts
                or nm in ("x", "y", "z", "unsigned", "int", "size_t", "long")
            ):
                continue
            if nm in params and nm not in assigned:
                continue
            if nm in _template_names(src, fn):
                continue
            return False
        return True


def param_names(fn: ts.Node) -> set[str]:
    out: set[str] = set()
    d = fn.child_by_field_name("declarator")
    while d is not None and d.type != "function_declarator":
        d = d.child_by_field_name("declarator")
    params = d.child_by_field_name("parameters") if d is not None else None
    for p in params.named_children if params is not None else []:
        if p.type == "parameter_declaration" and (nm := S.decl_name(p)):
            out.add(nm)
    return out


def _template_names(src: CudaSource, fn: ts.Node) -> set[str]:
    p = fn.parent
    if p is None or p.type != "template_declaration":
        return set()
    params = p.child_by_field_name("parameters")
    out = set()
    for c in params.named_children if params is not None else []:
        for n in S.walk(c):
            if n.type == "identifier":
                out.add(src.text_of(n))
    return out
