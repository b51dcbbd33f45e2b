"""Guards as early returns: `if (row < M) { body }` closing a kernel becomes
`if (row >= M) return;` followed by the body, one indent level out.

Nothing follows the `if` in the kernel, so the threads that fail the test do nothing either way;
the rewrite is refused when the body declares a name the kernel's top level already declares.
"""

from __future__ import annotations

import tree_sitter as ts

from klineage.source import syntax as S
from klineage.source.canon.base import Rule
from klineage.source.canon.loops import param_names
from klineage.source.edit import Edit
from klineage.source.model import CudaSource

_NEGATED = {"<": ">=", "<=": ">", ">": "<=", ">=": "<", "==": "!=", "!=": "=="}


def negate(src: CudaSource, cond: ts.Node) -> str:
    """Text of the negation of a condition: relations flipped, `&&` by De Morgan, else `!(...)`."""
    if cond.type in ("condition_clause", "parenthesized_expression") and len(cond.named_children) == 1:
        return negate(src, cond.named_children[0])
    if cond.type == "binary_expression":
        op = cond.child_by_field_name("operator")
        left, right = cond.child_by_field_name("left"), cond.child_by_field_name("right")
        if op is not None and left is not None and right is not None:
            if op.type in _NEGATED:
                return f"{src.text_of(left)} {_NEGATED[op.type]} {src.text_of(right)}"
            if op.type == "&&":
                return f"{_or_operand(negate(src, left))} || {_or_operand(negate(src, right))}"
    return f"!({src.text_of(cond)})"


def is_bound_check(cond: ts.Node) -> bool:
    """An ordering test (`<`, `<=`, `>`, `>=`), or a conjunction of them: a bounds guard, not a
    role test such as `warp == 0` (which experts keep as a branch)."""
    if cond.type in ("condition_clause", "parenthesized_expression") and len(cond.named_children) == 1:
        return is_bound_check(cond.named_children[0])
    op = cond.child_by_field_name("operator") if cond.type == "binary_expression" else None
    if op is None:
        return False
    if op.type == "&&":
        return all(
            is_bound_check(c)
            for c in (cond.child_by_field_name("left"), cond.child_by_field_name("right"))
            if c is not None
        )
    return op.type in ("<", "<=", ">", ">=")


def _or_operand(text: str) -> str:
    return f"({text})" if "&&" in text or "?" in text else text


def _declared(stmts: list[ts.Node]) -> set[str]:
    """Names the declarations among `stmts` declare (this scope only)."""
    out: set[str] = set()
    for s in stmts:
        if s.type == "declaration":
            out |= {n for d in s.children_by_field_name("declarator") if (n := S.declarator_ident(d))}
    return out


def _dedent(text: str, by: int) -> str:
    out = []
    for line in text.split("\n"):
        head = len(line) - len(line.lstrip(" \t"))
        out.append(line[min(by, head) :])
    return "\n".join(out)


class GuardToReturn(Rule):
    name = "guard_to_return"
    summary = "a guard around the rest of a kernel is written as an early return"

    def edits(self, src: CudaSource) -> list[Edit]:
        out = []
        for k in src.kernels:
            fn = src.node_for(k)
            body = fn.child_by_field_name("body")
            stmts = [c for c in body.named_children if c.type != "comment"] if body is not None else []
            if not stmts or stmts[-1].type != "if_statement":
                continue
            e = self._edit(src, fn, stmts)
            if e is not None:
                out.append(e)
        return out

    def _edit(self, src: CudaSource, fn: ts.Node, stmts: list[ts.Node]) -> Edit | None:
        guard = stmts[-1]
        cond, cons = guard.child_by_field_name("condition"), guard.child_by_field_name("consequence")
        if cond is None or cons is None or guard.child_by_field_name("alternative") is not None:
            return None
        if cons.type != "compound_statement" or S.assigned_in(cond) or S.has_call(cond, r".*"):
            return None
        if not is_bound_check(cond):
            return None
        inner = [c for c in cons.named_children if c.type != "comment"]
        if not inner:
            return None
        outer = _declared(stmts[:-1]) | param_names(fn)
        if _declared(inner) & outer:
            return None
        indent = src.text_bytes[src.line_start(src.line_of(guard.start_byte)) : guard.start_byte].decode()
        first = cons.named_children[0]
        inner_indent = src.text_bytes[
            src.line_start(src.line_of(first.start_byte)) : first.start_byte
        ].decode()
        by = max(0, len(inner_indent) - len(indent)) if not inner_indent.strip() else 0
        a = cons.children[0].end_byte  # after `{`
        b = cons.children[-1].start_byte  # before `}`
        body = src.text_bytes[a:b].decode().strip("\n").rstrip()
        body = _dedent(body, by).lstrip(" \t")
        sep = f"\n{indent}" if not indent.strip() else " "
        return Edit(guard.start_byte, guard.end_byte, f"if ({negate(src, cond)}) return;{sep}{body}")
