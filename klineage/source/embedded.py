"""CUDA embedded in Python (KernelBench-style `load_inline`), read and rewritten with libcst.

Sources are found where they feed `load_inline(cpp_sources=..., cuda_sources=...)` (keyword or
positional), written inline or as a module-level variable, alone or in a list. Rewriting replaces
only the string literals whose text changes; every other byte of the Python file stays as it was.
"""

from __future__ import annotations

import ast
from collections.abc import Mapping
from dataclasses import dataclass

import libcst as cst
from libcst.metadata import MetadataWrapper, PositionProvider

from klineage.errors import SourceError

_SOURCE_ARGS = {"cpp_sources": 1, "cuda_sources": 2}  # keyword -> positional index in load_inline
_Str = cst.SimpleString | cst.ConcatenatedString


@dataclass(frozen=True)
class EmbeddedCuda:
    """One source string: where it is, which call and keyword it feeds, and its text."""

    index: int
    name: str | None  # module-level variable holding it, None for a literal in the call
    call: str | None  # the load_inline `name=` value
    kwarg: str  # cuda_sources or cpp_sources
    item: int | None  # position in a list/tuple value
    value: str
    line: int  # line of the literal in the Python file
    functions: tuple[str, ...]

    @property
    def is_cuda(self) -> bool:
        return self.kwarg == "cuda_sources"


@dataclass(frozen=True)
class _Found:
    entry: EmbeddedCuda
    node: cst.CSTNode


def _load_inline_names(module: cst.Module) -> set[str]:
    """`load_inline` plus any name it is imported as (`from ... import load_inline as li`)."""
    names = {"load_inline"}

    class V(cst.CSTVisitor):
        def visit_ImportAlias(self, node: cst.ImportAlias) -> None:
            if isinstance(node.name, cst.Name) and node.name.value == "load_inline" and node.asname:
                alias = node.asname.name
                if isinstance(alias, cst.Name):
                    names.add(alias.value)

    module.visit(V())
    return names


def _is_load_inline(call: cst.Call, names: set[str]) -> bool:
    f = call.func
    return (isinstance(f, cst.Name) and f.value in names) or (
        isinstance(f, cst.Attribute) and f.attr.value == "load_inline"
    )


def _module_assignments(module: cst.Module) -> dict[str, cst.BaseExpression]:
    """Last module-level `NAME = value` (or annotated) for each name."""
    out: dict[str, cst.BaseExpression] = {}
    for stmt in module.body:
        if not isinstance(stmt, cst.SimpleStatementLine):
            continue
        for small in stmt.body:
            if isinstance(small, cst.Assign):
                for t in small.targets:
                    if isinstance(t.target, cst.Name):
                        out[t.target.value] = small.value
            elif (
                isinstance(small, cst.AnnAssign)
                and small.value is not None
                and isinstance(small.target, cst.Name)
            ):
                out[small.target.value] = small.value
    return out


def _const_str(expr: cst.BaseExpression | None) -> str | None:
    if isinstance(expr, _Str):
        v = expr.evaluated_value
        return v if isinstance(v, str) else None
    return None


class _Scanner:
    """Walks load_inline calls and resolves their source arguments to string literal nodes."""

    def __init__(self, wrapper: MetadataWrapper, path: str) -> None:
        self.module = wrapper.module
        self.positions = wrapper.resolve(PositionProvider)
        self.path = path
        self.assigned = _module_assignments(self.module)
        self.found: list[_Found] = []
        self._seen: set[int] = set()

    def line(self, node: cst.CSTNode) -> int:
        return self.positions[node].start.line

    def run(self) -> list[_Found]:
        calls: list[cst.Call] = []
        names = _load_inline_names(self.module)

        class V(cst.CSTVisitor):
            def visit_Call(self, node: cst.Call) -> None:
                if _is_load_inline(node, names):
                    calls.append(node)

        self.module.visit(V())
        for call in calls:
            self._call(call)
        return self.found

    def _call(self, call: cst.Call) -> None:
        by_kw = {a.keyword.value: a.value for a in call.args if a.keyword is not None}
        positional = [a.value for a in call.args if a.keyword is None and not a.star]
        name = _const_str(by_kw.get("name", positional[0] if positional else None))
        funcs = by_kw.get("functions")
        functions = tuple(s for e in getattr(funcs, "elements", ()) if (s := _const_str(e.value)) is not None)
        for kw, pos in _SOURCE_ARGS.items():
            expr = by_kw.get(kw, positional[pos] if len(positional) > pos else None)
            if expr is not None:
                self._value(expr, kw, name, functions, var=None)

    def _value(
        self,
        expr: cst.BaseExpression,
        kw: str,
        call: str | None,
        functions: tuple[str, ...],
        var: str | None,
        depth: int = 0,
    ) -> None:
        if isinstance(expr, cst.Name) and depth < 3:
            if expr.value not in self.assigned:
                raise SourceError(
                    f"{self.path}:{self.line(expr)}: {kw}={expr.value}: no module-level "
                    "assignment of that name to read the source from"
                )
            self._value(self.assigned[expr.value], kw, call, functions, expr.value, depth + 1)
        elif isinstance(expr, cst.List | cst.Tuple):
            for i, el in enumerate(expr.elements):
                if isinstance(el.value, cst.Name):
                    self._value(el.value, kw, call, functions, None, depth + 1)
                else:
                    self._string(el.value, kw, call, functions, var, i)
        else:
            self._string(expr, kw, call, functions, var, None)

    def _string(
        self,
        expr: cst.BaseExpression,
        kw: str,
        call: str | None,
        functions: tuple[str, ...],
        var: str | None,
        item: int | None,
    ) -> None:
        value = _const_str(expr)
        if value is None:
            what = "an f-string" if _has_fstring(expr) else f"computed ({type(expr).__name__})"
            label = f"{kw}={var}" if var else kw
            raise SourceError(
                f"{self.path}:{self.line(expr)}: {label} is {what}; only plain string "
                "literals can be read and rewritten"
            )
        if id(expr) in self._seen:
            return
        self._seen.add(id(expr))
        entry = EmbeddedCuda(len(self.found), var, call, kw, item, value, self.line(expr), functions)
        self.found.append(_Found(entry, expr))


def _has_fstring(expr: cst.BaseExpression) -> bool:
    if isinstance(expr, cst.FormattedString):
        return True
    if isinstance(expr, cst.ConcatenatedString):
        return _has_fstring(expr.left) or _has_fstring(expr.right)
    return False


def _scan(py_text: str, path: str) -> tuple[MetadataWrapper, list[_Found]]:
    try:
        module = cst.parse_module(py_text)
    except cst.ParserSyntaxError as e:
        raise SourceError(
            f"{path}:{e.raw_line}:{e.raw_column + 1}: Python does not parse: {e.message}"
        ) from None
    wrapper = MetadataWrapper(module, unsafe_skip_copy=True)
    return wrapper, _Scanner(wrapper, path).run()


def read_embedded_cuda(py_text: str, path: str = "<memory>") -> list[EmbeddedCuda]:
    """Every source string fed to `load_inline`, in call order (cpp_sources before cuda_sources)."""
    return [f.entry for f in _scan(py_text, path)[1]]


# --- writing ----------------------------------------------------------------------------------


def _escape(value: str, quote: str) -> str:
    out = []
    for ch in value.replace("\\", "\\\\"):
        if ch == "\n" and len(quote) == 1:
            out.append("\\n")
        elif ch == "\r":
            out.append("\\r")
        elif ch == quote[0] and len(quote) == 1:
            out.append("\\" + ch)
        elif ord(ch) < 32 and ch not in "\n\t":
            out.append(f"\\x{ord(ch):02x}")
        else:
            out.append(ch)
    body = "".join(out)
    if len(quote) == 3:
        body = body.replace(quote, quote[:2] + "\\" + quote[0])
        if body.endswith(quote[0]):
            # the closing quotes would swallow it unless it is escaped: an odd run of backslashes
            # before it escapes it (an even run is escaped backslashes, e.g. the text `\\"`)
            run = len(body) - 1 - len(body[:-1].rstrip("\\"))
            if run % 2 == 0:
                body = body[:-1] + "\\" + quote[0]
    return body


def _literal(prefix: str, quote: str, value: str) -> str:
    """A Python literal for `value` in the old literal's style; raw only where raw can say it."""
    candidates = []
    if "r" in prefix.lower():
        candidates.append(f"{prefix}{quote}{value}{quote}")
    plain = prefix.replace("r", "").replace("R", "")
    candidates.append(f"{plain}{quote}{_escape(value, quote)}{quote}")
    for lit in candidates:
        try:
            if ast.literal_eval(lit) == value:
                return lit
        except (SyntaxError, ValueError):
            continue
    raise SourceError(f"cannot write {value[:40]!r} as a Python string literal")  # pragma: no cover


def _first_simple(node: cst.CSTNode) -> cst.SimpleString:
    while isinstance(node, cst.ConcatenatedString):
        node = node.left
    assert isinstance(node, cst.SimpleString)
    return node


def _new_node(old: cst.CSTNode, value: str) -> cst.CSTNode:
    first = _first_simple(old)
    lit = _literal(first.prefix, first.quote, value)
    if isinstance(old, cst.SimpleString):
        return old.with_changes(value=lit)
    assert isinstance(old, cst.ConcatenatedString)
    return cst.SimpleString(value=lit, lpar=old.lpar, rpar=old.rpar)


class _Rewriter(cst.CSTTransformer):
    def __init__(self, replacements: dict[int, str]) -> None:
        super().__init__()
        self.replacements = replacements

    def on_leave(self, original_node, updated_node):  # type: ignore[no-untyped-def]
        value = self.replacements.get(id(original_node))
        return _new_node(original_node, value) if value is not None else updated_node


def write_embedded_cuda(py_text: str, changes: Mapping[int | str, str], path: str = "<memory>") -> str:
    """Rewrite the sources named by index (from `read_embedded_cuda`) or variable name.

    Only literals whose value changes are rewritten (a concatenation becomes one literal); the
    rest of the file is returned byte for byte.
    """
    wrapper, found = _scan(py_text, path)
    replacements: dict[int, str] = {}
    for key, new in changes.items():
        if isinstance(key, int):
            if not 0 <= key < len(found):
                raise SourceError(f"{path}: no embedded source #{key} (found {len(found)})")
            hits = [found[key]]
        else:
            hits = [f for f in found if f.entry.name == key]
            if len(hits) != 1:
                raise SourceError(
                    f"{path}: variable {key!r} names {len(hits)} embedded sources; use an index instead"
                )
        f = hits[0]
        if new != f.entry.value:
            replacements[id(f.node)] = new
    if not replacements:
        return py_text
    return wrapper.module.visit(_Rewriter(replacements)).code
