"""What a KernelBench problem file says without running it: its size constants and how
`get_inputs()` draws each tensor (read from the AST).

Sizes: KernelBench problems set their sizes in module-level constants (`batch_size = 16`,
`N = 2048 * 2`, `input_shape = (8192 * 2,)`) that `get_inputs()` and `get_init_inputs()` read at
call time. A constant whose right-hand side is literal arithmetic (no names) is a *size knob*;
assignments that read other names (`bias_shape = (out_channels, 1, 1)`) are derived and are
re-run after the knobs change, so they follow.

Domains: each element of the list `get_inputs()` returns is traced back (through the function's
own assignments) to the call that draws it: `torch.rand` -> uniform [0, 1), `torch.randn` ->
normal, `torch.randint(lo, hi, ...)` -> integers with bounds on the size knobs, a `softmax` of a
draw -> probabilities. Reading the source rather than sampling values gives exact bounds that
follow the scaled sizes (a class count of 4096 scaled to 16 gives targets below 16). An element
that is none of these (`torch.tril(...)`, `rand * 2 - 1`) gets no domain: the workload then takes
that tensor from `get_inputs()` itself, run at the scaled sizes under the gate's seed.
"""

from __future__ import annotations

import ast
from collections.abc import Mapping
from dataclasses import dataclass

from klineage.domains import Domain

_LITERAL = (
    ast.Expression,
    ast.Constant,
    ast.BinOp,
    ast.UnaryOp,
    ast.Tuple,
    ast.Load,
    ast.Add,
    ast.Sub,
    ast.Mult,
    ast.FloorDiv,
    ast.Pow,
    ast.USub,
    ast.Mod,
)

Knob = int | tuple[int, ...]


@dataclass(frozen=True)
class ProblemSource:
    """The parsed file: its size knobs in file order, and the top-level assignments to re-run."""

    knobs: dict[str, Knob]
    assignments: list[ast.stmt]
    domains: list[Domain | None] | None  # per element of get_inputs()'s list; None: not a list literal


def read_source(text: str, where: str) -> ProblemSource:
    tree = ast.parse(text, filename=where)
    knobs: dict[str, Knob] = {}
    assignments: list[ast.stmt] = []
    for stmt in tree.body:
        if not isinstance(stmt, ast.Assign | ast.AnnAssign):
            continue
        targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]
        if len(targets) != 1 or stmt.value is None:
            continue
        target = targets[0]
        if isinstance(target, ast.Tuple) and all(isinstance(t, ast.Name) for t in target.elts):
            value = _literal(stmt.value)  # `depth, height, width = 16, 32, 32`
            if isinstance(value, tuple) and len(value) == len(target.elts):
                assignments.append(stmt)
                knobs |= {t.id: v for t, v in zip(target.elts, value, strict=True)}  # type: ignore[union-attr]
            continue
        if not isinstance(target, ast.Name):
            continue
        assignments.append(stmt)
        value = _literal(stmt.value)
        if value is not None:
            knobs[target.id] = value
    fn = next((s for s in tree.body if isinstance(s, ast.FunctionDef) and s.name == "get_inputs"), None)
    return ProblemSource(knobs, assignments, _input_domains(fn, set(knobs)) if fn else None)


def _literal(node: ast.expr) -> Knob | None:
    """An int or a tuple of ints made of literal arithmetic only, else None."""
    expr = ast.Expression(node)
    if not all(isinstance(n, _LITERAL) for n in ast.walk(expr)):
        return None
    try:
        v = eval(compile(expr, "<knob>", "eval"), {"__builtins__": {}})  # noqa: S307 - literals only
    except Exception:
        return None
    if isinstance(v, bool):
        return None
    if isinstance(v, int):
        return v
    if isinstance(v, tuple) and v and all(isinstance(x, int) and not isinstance(x, bool) for x in v):
        return v
    return None


#: knobs at or below this are kept as they are (kernel sizes, strides, axes, small group counts)
SMALL = 8


def scaled(knobs: Mapping[str, Knob], cap: int, divide: bool = True) -> dict[str, Knob]:
    """The knobs at a smaller size. `divide`: every knob above SMALL divided by one power of two,
    the smallest that brings the largest knob to `cap` or below, and kept at SMALL or above
    (ratios between sizes survive: `out_channels == 2 * width` still holds); else every knob
    capped at `cap`. Knobs at or below SMALL stay as they are."""
    values = [x for v in knobs.values() for x in (v if isinstance(v, tuple) else (v,))]
    f = 1
    while divide and max(values, default=0) // f > cap:
        f *= 2

    def one(x: int) -> int:
        if x <= SMALL:
            return x
        return max(x // f, SMALL) if divide else min(x, cap)

    return {k: (tuple(one(x) for x in v) if isinstance(v, tuple) else one(v)) for k, v in knobs.items()}


def flat(knobs: Mapping[str, Knob]) -> dict[str, int]:
    """Knobs as shape bindings: an int under its name, a tuple as name[i]."""
    out: dict[str, int] = {}
    for k, v in knobs.items():
        if isinstance(v, tuple):
            out |= {f"{k}[{i}]": x for i, x in enumerate(v)}
        else:
            out[k] = v
    return out


def unflat(bindings: Mapping[str, int], knobs: Mapping[str, Knob]) -> dict[str, Knob]:
    """The knob values a binding carries (the inverse of `flat`)."""
    return {
        k: (tuple(bindings[f"{k}[{i}]"] for i in range(len(v))) if isinstance(v, tuple) else bindings[k])
        for k, v in knobs.items()
    }


# ---- get_inputs() -> domains ---------------------------------------------------------------------


def _input_domains(fn: ast.FunctionDef, knob_names: set[str]) -> list[Domain | None] | None:
    assigned: dict[str, ast.expr] = {}
    returned: ast.expr | None = None
    for stmt in fn.body:
        if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name):
            assigned[stmt.targets[0].id] = stmt.value
        elif isinstance(stmt, ast.Return):
            returned = stmt.value
    if not isinstance(returned, ast.List | ast.Tuple):
        return None
    out: list[Domain | None] = []
    for elt in returned.elts:
        if isinstance(elt, ast.Starred):
            return None
        out.append(_domain(_resolve(elt, assigned), assigned, knob_names))
    return out


def _resolve(e: ast.expr, assigned: Mapping[str, ast.expr]) -> ast.expr:
    seen = 0
    while isinstance(e, ast.Name) and e.id in assigned and seen < 8:
        e, seen = assigned[e.id], seen + 1
    return e


def _call_name(e: ast.expr) -> str:
    """`torch.rand(...)` -> "rand"; `x.softmax(...)` -> "softmax"; else ""."""
    if isinstance(e, ast.Call):
        f = e.func
        if isinstance(f, ast.Attribute):
            return f.attr
        if isinstance(f, ast.Name):
            return f.id
    return ""


def _bound(e: ast.expr, knob_names: set[str]) -> int | str | None:
    """A randint bound: a literal int, or arithmetic on size knobs (kept as an expression)."""
    lit = _literal(e)
    if isinstance(lit, int):
        return lit
    names = {n.id for n in ast.walk(e) if isinstance(n, ast.Name)}
    ok = all(
        isinstance(
            n, ast.Name | ast.Constant | ast.BinOp | ast.Load | ast.operator | ast.UnaryOp | ast.unaryop
        )
        for n in ast.walk(e)
    )
    return ast.unparse(e) if ok and names and names <= knob_names else None


def _is_module(e: ast.expr) -> bool:
    """`torch`, `F`, `torch.nn.functional`: a module, not a tensor expression."""
    return (isinstance(e, ast.Name) and e.id in ("torch", "F", "functional")) or (
        isinstance(e, ast.Attribute) and e.attr in ("functional", "nn")
    )


def _domain(e: ast.expr, assigned: Mapping[str, ast.expr], knob_names: set[str]) -> Domain | None:
    name = _call_name(e)
    if name == "rand":
        return Domain("uniform", 0, 1)
    if name == "randn":
        return Domain("normal")
    if name == "randint" and isinstance(e, ast.Call):
        args = list(e.args)
        if len(args) >= 3:
            lo, hi = _bound(args[0], knob_names), _bound(args[1], knob_names)
        elif len(args) == 2:  # randint(high, size)
            lo, hi = 0, _bound(args[0], knob_names)
        else:
            return None
        return Domain("integers", lo, hi) if lo is not None and hi is not None else None
    if name == "bool" and isinstance(e, ast.Call) and isinstance(e.func, ast.Attribute):
        inner = _domain(_resolve(e.func.value, assigned), assigned, knob_names)
        return inner if inner is not None and inner.kind == "integers" else None
    if name in ("softmax", "Softmax") and isinstance(e, ast.Call):
        f = e.func
        module_fn = isinstance(f, ast.Name) or (isinstance(f, ast.Attribute) and _is_module(f.value))
        base = (
            (e.args[0] if e.args else None)
            if module_fn
            else (f.value if isinstance(f, ast.Attribute) else None)
        )
        rest = e.args[1:] if module_fn else e.args
        dim = next((k.value for k in e.keywords if k.arg == "dim"), rest[0] if rest else None)
        d = _literal(dim) if dim is not None else None
        if not isinstance(d, int) or base is None:
            return None
        draws = [
            _call_name(n) for n in ast.walk(_resolve(base, assigned)) if _call_name(n) in ("rand", "randn")
        ]
        if not draws:
            return None
        return Domain("softmax", dim=d, of="uniform" if draws[0] == "rand" else "normal")
    return None
