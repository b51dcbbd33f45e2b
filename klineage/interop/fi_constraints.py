"""FlashInfer-Trace `constraints` and index semantics as shape rules and value domains.

A definition's constraints are Python expressions over its axes and inputs. Two forms occur:
- `len_indptr == batch_size + 1`: an axis *derived* from others; every shape binding computes it,
  so related axes are never given independent (inconsistent) values;
- `num_kv_indices == kv_indptr[-1].item()`: the last offset of an indptr input equals an axis;
  that input gets the `indptr` domain ending at that axis (0 first, never decreasing).
Inputs the definitions leave implicit get the domain their role requires: `*indices` index the
first axis of the paged cache (`num_pages`) or the tensor they gather from; `last_page_len`
lies in [1, page_size]; `probs` are rows of probabilities. Any other constraint is refused with
its text: drawing inputs that ignore it would judge kernels on inputs the operator never sees.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from klineage.domains import Domain
from klineage.errors import WorkloadError

_INDPTR = re.compile(r"^\s*(\w+)\s*==\s*(\w+)\s*\[\s*-1\s*\]\s*(?:\.item\(\s*\))?\s*$")


@dataclass
class Rules:
    """Derived axes (axis -> expression on other axes) and per-input value domains."""

    derived: dict[str, str] = field(default_factory=dict)
    domains: dict[str, Domain] = field(default_factory=dict)
    #: axes that are the length of an indptr (at least 2, so that it can end above 0)
    indptr_lengths: set[str] = field(default_factory=set)

    def bind(self, values: Mapping[str, int]) -> dict[str, int]:
        """A full binding: free axes as given (indptr lengths at least 2), derived ones computed."""
        from klineage.workload import eval_dim

        b = {
            a: (max(v, 2) if a in self.indptr_lengths else v)
            for a, v in values.items()
            if a not in self.derived
        }
        for _ in range(len(self.derived) + 1):
            for a, expr in self.derived.items():
                try:
                    b[a] = int(eval_dim(expr, b))
                except KeyError:
                    continue
        return {a: b[a] for a in values} | {a: v for a, v in b.items() if a not in values}


def read_rules(
    constraints: Sequence[str], axes: Mapping[str, Mapping], inputs: Mapping[str, Mapping], where: str
) -> Rules:
    const = {a: int(s["value"]) for a, s in axes.items() if s.get("type") == "const"}
    var = [a for a in axes if a not in const]
    rules = Rules()
    for c in constraints:
        m = _INDPTR.match(c)
        if m and m.group(1) in var and m.group(2) in inputs:
            axis, name = m.group(1), m.group(2)
            rules.domains[name] = Domain("indptr", total=axis)
            shape = inputs[name].get("shape") or []
            if len(shape) == 1 and isinstance(shape[0], str) and shape[0] in var:
                rules.indptr_lengths.add(shape[0])
            continue
        derived = _derived(c, var, const)
        if derived is None:
            raise WorkloadError(
                f"{where}: constraint `{c}` is not one KLineage can satisfy when it draws inputs "
                "(known: `axis == <arithmetic on axes>`, `axis == <input>[-1].item()`)"
            )
        rules.derived[derived[0]] = derived[1]
    # an indptr whose length axis is derived (len_indptr == batch_size + 1) needs no clamp
    rules.indptr_lengths -= set(rules.derived)
    for name, spec in inputs.items():
        if name in rules.domains:
            continue
        d = _implicit(name, spec, inputs, var, const)
        if d is not None:
            rules.domains[name] = d
    return rules


def _derived(c: str, var: Sequence[str], const: Mapping[str, int]) -> tuple[str, str] | None:
    """`a == expr` (or `expr == a`) with `expr` arithmetic on axes: (a, expr with consts inlined)."""
    try:
        tree = ast.parse(c, mode="eval").body
    except SyntaxError:
        return None
    if not (isinstance(tree, ast.Compare) and len(tree.ops) == 1 and isinstance(tree.ops[0], ast.Eq)):
        return None
    sides = [tree.left, tree.comparators[0]]
    ok = (ast.BinOp, ast.Name, ast.Constant, ast.Load, ast.operator, ast.UnaryOp, ast.unaryop)
    for lhs, rhs in (sides, sides[::-1]):
        if isinstance(lhs, ast.Name) and lhs.id in var and all(isinstance(n, ok) for n in ast.walk(rhs)):
            names = {n.id for n in ast.walk(rhs) if isinstance(n, ast.Name)}
            if names <= set(var) | set(const) and lhs.id not in names:
                for k, v in const.items():
                    rhs = _substitute(rhs, k, v)
                return lhs.id, ast.unparse(rhs)
    return None


def _substitute(e: ast.expr, name: str, value: int) -> ast.expr:
    class T(ast.NodeTransformer):
        def visit_Name(self, node: ast.Name) -> ast.AST:
            return ast.Constant(value) if node.id == name else node

    return T().visit(e)


def _implicit(
    name: str, spec: Mapping, inputs: Mapping[str, Mapping], var: Sequence[str], const: Mapping[str, int]
) -> Domain | None:
    dtype = spec.get("dtype", "float32")
    shape = spec.get("shape") or []
    integer = dtype.startswith(("int", "uint"))
    if integer and name.endswith("indices"):
        if "num_pages" in var:
            return Domain("integers", 0, "num_pages")
        own = shape[0] if shape else None
        rows = [
            s["shape"][0]
            for n, s in inputs.items()
            if n != name
            and s.get("shape")
            and not s.get("dtype", "").startswith(("int", "uint"))
            and s["shape"][0] != own
        ]
        first = rows[0] if rows else None
        if isinstance(first, str) and first in var:
            return Domain("integers", 0, first)
        if isinstance(first, str) and first in const:
            return Domain("integers", 0, const[first])
        return None
    if integer and "last_page_len" in name:
        return Domain("integers", 1, const.get("page_size", 1) + 1)
    if not integer and name == "probs":
        return Domain("softmax", dim=-1, of="uniform")
    if not integer and name in ("top_p",):
        return Domain("uniform", 0.1, 1.0)
    if integer and name in ("top_k",):
        return Domain("integers", 1, 65)
    return None
