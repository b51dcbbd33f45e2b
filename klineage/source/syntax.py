"""Syntax helpers every rewrite shares: small facts about expressions and statements of a parsed
CUDA file (the declared names, what a block assigns, compile-time integers, identifier
substitution). The source model answers questions about constructs (kernels, loops, launches);
the canonicalizer (`klineage.source.canon`) and the operators (`klineage.deopt`) ask these.
"""

from __future__ import annotations

import ast
import math
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from functools import lru_cache
from types import MappingProxyType

import tree_sitter as ts

from klineage.source import memo
from klineage.source import nodes as N
from klineage.source.model import CudaSource

# --- text helpers ---------------------------------------------------------------------------------

_CONSTEXPR = re.compile(
    r"(?:static\s+)?(?:constexpr|const)\s+(?:static\s+)?(?:unsigned\s+|signed\s+)?(?:int|long|size_t|unsigned|auto|"
    r"int32_t|uint32_t|int64_t)\s+(\w+)\s*=\s*([^;{}]+);"
)
_DEFINE = re.compile(r"^[ \t]*#[ \t]*define[ \t]+(\w+)[ \t]+([^\n\\]+)$", re.M)
_INT_LIT = re.compile(r"\b(0[xX][0-9a-fA-F]+|\d+)[uUlL]*\b")


def squash(text: str) -> str:
    """Whitespace removed: a stable key for comparing small expressions."""
    return re.sub(r"\s+", "", text)


def subst_idents(text: str, mapping: Mapping[str, str]) -> str:
    """Replace whole identifiers (not field names after `.` or `->`) by their mapped text."""
    if not mapping:
        return text
    names = sorted(mapping, key=len, reverse=True)
    rx = re.compile(r"(?<![\w.])(?<!->)(" + "|".join(re.escape(n) for n in names) + r")(?!\w)")
    return rx.sub(lambda m: mapping[m.group(1)], text)


def paren(text: str) -> str:
    """Parenthesize an expression unless it is a name, number or call."""
    s = text.strip()
    if re.fullmatch(r"[\w.]+", s) or re.fullmatch(r"[\w:.]+\((?:[^()]|\([^()]*\))*\)", s):
        return s
    if s.startswith("(") and s.endswith(")") and _balanced_inside(s):
        return s
    return f"({s})"


def unparen_text(text: str) -> str:
    """`text` stripped, without the parentheses that enclose all of it (`((a + b))` is `a + b`;
    `(a) + (b)` stays). The text twin of `unparenthesized`, for operators that read expressions
    as text."""
    s = text.strip()
    while s.startswith("(") and s.endswith(")") and _balanced_inside(s):
        s = s[1:-1].strip()
    return s


def _balanced_inside(s: str) -> bool:
    depth = 0
    for i, ch in enumerate(s):
        depth += ch == "("
        depth -= ch == ")"
        if depth == 0 and i < len(s) - 1:
            return False
    return True


def file_constants(src: CudaSource) -> dict[str, int]:
    """Integer `constexpr`/`const` names and `#define`s of the file whose values are computable
    (a copy: callers add their own names to it)."""
    return dict(_file_constants(src))


def _declarators(m: re.Match[str]) -> list[tuple[str, str]]:
    """(name, value text) of each declarator of a constant declaration: `constexpr int A = 8, B = 4;`
    declares two (a comma inside parentheses belongs to its value)."""
    parts, depth, cur = [], 0, ""
    for ch in m.group(2):
        depth += 1 if ch in "([" else -1 if ch in ")]" else 0
        if ch == "," and depth == 0:
            parts.append(cur)
            cur = ""
        else:
            cur += ch
    parts.append(cur)
    out = [(m.group(1), parts[0])]
    for part in parts[1:]:
        d = re.fullmatch(r"\s*(\w+)\s*=\s*(.+)", part, re.S)
        if d is None:
            break
        out.append((d.group(1), d.group(2)))
    return out


@memo.per_text(maxsize=64)
def _file_constants(src: CudaSource) -> Mapping[str, int]:
    out: dict[str, int] = {"warpSize": 32}
    items = [(m.start(), name, expr) for m in _CONSTEXPR.finditer(src.text) for name, expr in _declarators(m)]
    items += [(m.start(), m.group(1), m.group(2)) for m in _DEFINE.finditer(src.text)]
    for _, name, expr in sorted(items):
        v = eval_int(expr, out)
        if v is not None and name not in out:
            out[name] = v
    return MappingProxyType(out)


#: the syntax of small C integer arithmetic, as Python parses it
_ARITHMETIC = (
    ast.Expression,
    ast.BinOp,
    ast.UnaryOp,
    ast.Constant,
    ast.Add,
    ast.Sub,
    ast.Mult,
    ast.FloorDiv,
    ast.Mod,
    ast.LShift,
    ast.RShift,
    ast.USub,
    ast.BitAnd,
    ast.BitOr,
    ast.BitXor,
)
#: and of conditions over it (`==`, `&&`, `!`, ...)
_CONDITIONS = (
    *_ARITHMETIC,
    ast.BoolOp,
    ast.Compare,
    ast.Not,
    ast.And,
    ast.Or,
    ast.Eq,
    ast.NotEq,
    ast.Lt,
    ast.LtE,
    ast.Gt,
    ast.GtE,
)


def _c_integer_text(text: str) -> str:
    """C integer text as Python reads it: casts dropped, literals in Python's spelling (suffixes,
    hex), `/` as integer division."""
    t = re.sub(r"static_cast<\s*\w+\s*>", "", text.strip())
    t = _INT_LIT.sub(lambda m: str(int(m.group(1), 0)), t)
    return t.replace("/", "//").replace("////", "//")


def _evaluate(text: str, env: Mapping[str, int], allowed: tuple[type, ...]) -> object:
    """The value of C text over literals and `env` read as Python, when its syntax is `allowed`."""
    t = subst_idents(_c_integer_text(text), {k: str(v) for k, v in env.items()})
    if ast.BoolOp in allowed:
        t = re.sub(r"!(?!=)", " not ", t.replace("&&", " and ").replace("||", " or "))
    try:
        tree = ast.parse(t, mode="eval")
    except SyntaxError:
        return None
    if not all(isinstance(n, allowed) for n in ast.walk(tree)):
        return None
    try:
        return eval(compile(tree, "<int>", "eval"), {"__builtins__": {}}, {})  # noqa: S307
    except (ZeroDivisionError, ValueError, OverflowError):
        return None


def eval_int(text: str, env: Mapping[str, int]) -> int | None:
    """The integer value of small C arithmetic over literals and known names, or None."""
    v = _evaluate(text, env, _ARITHMETIC)
    return v if isinstance(v, int) else None


@lru_cache(maxsize=4096)
def int_program(text: str) -> object | None:
    """`text` (small C integer arithmetic over names) compiled once, for evaluating it at many
    values of its names with `run_int`; None when its syntax is not that. Names keep their
    spelling except `.` (`threadIdx.x` is read as `threadIdx_x`)."""
    t = re.sub(r"\b([A-Za-z_]\w*)\.([xyz])\b", r"\1_\2", _c_integer_text(text))
    try:
        tree = ast.parse(t, mode="eval")
    except SyntaxError:
        return None
    if not all(isinstance(n, (*_ARITHMETIC, ast.Name, ast.Load)) for n in ast.walk(tree)):
        return None
    return compile(tree, "<int>", "eval")


def run_int(program: object | None, env: Mapping[str, int]) -> int | None:
    """The value of an `int_program` at `env` (names as `int_program` spells them), or None."""
    if program is None:
        return None
    try:
        v = eval(program, {"__builtins__": {}}, dict(env))  # noqa: S307
    except (ZeroDivisionError, ValueError, OverflowError, NameError, TypeError):
        return None
    return v if isinstance(v, int) else None


def eval_condition(text: str, env: Mapping[str, int]) -> bool | None:
    """The truth of a C integer condition (`==`, `%`, `&&`, `!`, ...) over literals and `env`, or None."""
    v = _evaluate(" ".join(text.split()), env, _CONDITIONS)
    return bool(v) if isinstance(v, int) else None


#: the math functions real-valued C text may call, as Python computes them
_REAL_CALLS = {
    **{f: math.exp for f in ("expf", "__expf", "exp", "__exp")},
    **{f: max for f in ("fmaxf", "fmax", "max")},
    **{f: min for f in ("fminf", "fmin", "min")},
}
_REAL_LIT = re.compile(r"\b(\d+\.?\d*(?:[eE][-+]?\d+)?|\.\d+(?:[eE][-+]?\d+)?)[fF]?\b")


def eval_real(text: str, env: Mapping[str, float]) -> float | None:
    """The value of real-valued C arithmetic (`+ - * /`, literals such as `1.0f`, exp/max/min
    calls) over `env`, or None when it reads anything else (a cast, a subscript, another call):
    lets an operator check what an update computes by evaluating it at sample values."""
    t = _REAL_LIT.sub(lambda m: m.group(1), " ".join(text.split()))
    try:
        tree = ast.parse(t, mode="eval")
    except SyntaxError:
        return None
    ok = (ast.Expression, ast.BinOp, ast.UnaryOp, ast.Constant, ast.Add, ast.Sub, ast.Mult, ast.Div)
    for n in ast.walk(tree):
        if isinstance(n, ast.Call):
            if not (isinstance(n.func, ast.Name) and n.func.id in _REAL_CALLS and not n.keywords):
                return None
        elif isinstance(n, ast.Name):
            if n.id not in env and n.id not in _REAL_CALLS:
                return None
        elif not isinstance(n, (*ok, ast.USub, ast.UAdd, ast.Load)):
            return None
    names = {**_REAL_CALLS, **{k: float(v) for k, v in env.items()}}
    try:
        v = eval(compile(tree, "<real>", "eval"), {"__builtins__": {}}, names)  # noqa: S307
    except (ZeroDivisionError, ValueError, OverflowError, TypeError):
        return None
    return float(v) if isinstance(v, int | float) else None


def is_pow2(v: int | None) -> bool:
    return v is not None and v > 0 and v & (v - 1) == 0


# --- tree helpers ---------------------------------------------------------------------------------


def walk(node: ts.Node) -> Iterator[ts.Node]:
    return N.walk(node)


def call_name(call: ts.Node) -> str:
    name, _ = N.callee(call.child_by_field_name("function"))
    return name


def named(node: ts.Node | None) -> list[ts.Node]:
    """`node`'s named children but its comments ([] for None): a block's statements, a call's
    arguments, what a parenthesis holds."""
    return [c for c in node.named_children if c.type != "comment"] if node is not None else []


def call_args(call: ts.Node) -> list[ts.Node]:
    return named(call.child_by_field_name("arguments"))


def fresh_name(taken: set[str], name: str) -> str:
    """`name`, underscored until no name in `taken` holds it; the result joins `taken` (a rewrite
    that declares several locals asks for each in turn)."""
    while name in taken:
        name += "_"
    taken.add(name)
    return name


def fresh_numbered(taken: set[str], name: str, sep: str = "", first: int = 2) -> str:
    """`name`, or `name{sep}{k}` for the first k from `first` that no name in `taken` holds; the
    result joins `taken` (the numbered spelling of `fresh_name`, for rewrites whose names read
    better numbered: `kl_v`, `kl_v_2`)."""
    out, k = name, first
    while out in taken:
        out, k = f"{name}{sep}{k}", k + 1
    taken.add(out)
    return out


def unparenthesized(node: ts.Node, *, clause: bool = False) -> ts.Node:
    """The expression `node` stands for, its parentheses taken off (`((x))` is `x`); with `clause`,
    an `if`/`while` condition clause too (its condition: the last part, after any initializer).
    Comments are not part of it. Operators read structure, not how many parentheses an author wrote."""
    kinds = ("parenthesized_expression", "condition_clause") if clause else ("parenthesized_expression",)
    while node.type in kinds:
        inner = named(node)
        if not inner:
            break
        node = inner[-1]
    return node


def calls_named(node: ts.Node, pattern: str) -> list[ts.Node]:
    rx = re.compile(pattern)
    return [
        n
        for n in walk(node)
        if n.type == "call_expression" and N.kernel_call_syntax(n) is None and rx.fullmatch(call_name(n))
    ]


def fn_node_of(node: ts.Node) -> ts.Node | None:
    return node if node.type == "function_definition" else N.enclosing_function(node)


def param_nodes(fn: ts.Node) -> list[ts.Node]:
    """The parameter declarations of a function definition, in order."""
    d = N.func_declarator(fn)
    params = d.child_by_field_name("parameters") if d is not None else None
    return [p for p in params.named_children if p.type == "parameter_declaration"] if params else []


def decl_name(decl: ts.Node) -> str | None:
    d = decl.child_by_field_name("declarator")
    while d is not None and d.type not in ("identifier", "field_identifier"):
        d = d.child_by_field_name("declarator") or (d.named_children[0] if d.named_children else None)
    return d.text.decode() if d is not None and d.text else None


def pointer_inits(fn: ts.Node) -> Iterator[tuple[ts.Node, ts.Node, ts.Node, ts.Node]]:
    """(declaration, type, pointer declarator, initializer) of each declaration under `fn` of one
    pointer with an initializer (`T* p = E;`): the aliases and carves of shared arrays."""
    for n in walk(fn):
        if n.type != "declaration" or len(n.children_by_field_name("declarator")) != 1:
            continue
        d, ty = n.child_by_field_name("declarator"), n.child_by_field_name("type")
        v = d.child_by_field_name("value") if d is not None and d.type == "init_declarator" else None
        ptr = d.child_by_field_name("declarator") if v is not None else None
        if v is not None and ty is not None and ptr is not None and ptr.type == "pointer_declarator":
            yield n, ty, ptr, v


def local_decls(fn: ts.Node) -> dict[str, ts.Node]:
    """name -> the declarator node (init_declarator, plain declarator or parameter) in `fn`.

    The walk is cached by the subtree's text (`_decl_spans`: offsets from `fn`'s start, so the
    answer holds wherever that text stands) and the nodes are found again in `fn`'s own tree:
    the forward analyses ask about the same kernel bodies thousands of times a step."""
    base, out = fn.start_byte, {}
    for name, (start, end, kind) in _decl_spans(_BySubtreeText(fn)):
        node = fn.descendant_for_byte_range(base + start, base + end)
        while node is not None and node.type != kind and node.byte_range == (base + start, base + end):
            node = node.parent
        if node is None or node.type != kind or node.byte_range != (base + start, base + end):
            return _local_decls(fn)  # not expected: the uncached answer
        out[name] = node
    return out


def _local_decls(fn: ts.Node) -> dict[str, ts.Node]:
    out: dict[str, ts.Node] = {}
    for n in walk(fn):
        if n.type in ("declaration", "parameter_declaration"):
            for d in n.children_by_field_name("declarator"):
                nm = declarator_ident(d)
                if nm and nm not in out:
                    out[nm] = d
    return out


@lru_cache(maxsize=1024)
def _decl_spans(keyed: _BySubtreeText) -> tuple[tuple[str, tuple[int, int, str]], ...]:
    base = keyed.node.start_byte
    return tuple(
        (name, (d.start_byte - base, d.end_byte - base, d.type))
        for name, d in _local_decls(keyed.node).items()
    )


def declarator_ident(d: ts.Node) -> str | None:
    cur: ts.Node | None = d
    while cur is not None and cur.type not in ("identifier", "field_identifier"):
        cur = cur.child_by_field_name("declarator") or (cur.named_children[0] if cur.named_children else None)
    return cur.text.decode() if cur is not None and cur.text else None


def init_text(src: CudaSource, fn: ts.Node, name: str) -> str | None:
    """The initializer text of local `name` in `fn` when it is declared once and never reassigned."""
    count, span = _init_spans(_BySubtreeText(fn)).get(name, (0, None))
    if count != 1 or span is None or name in assigned_in(fn):
        return None
    return src.text_of((fn.start_byte + span[0], fn.start_byte + span[1]))


@lru_cache(maxsize=1024)
def _init_spans(keyed: _BySubtreeText) -> Mapping[str, tuple[int, tuple[int, int] | None]]:
    """name -> (how many init_declarators declare it under the subtree, the first one's value as
    offsets from the subtree's start): `init_text`'s walk, once per subtree text."""
    base, out = keyed.node.start_byte, {}
    for d in walk(keyed.node):
        if d.type == "init_declarator" and (name := declarator_ident(d)):
            v = d.child_by_field_name("value")
            count, span = out.get(name, (0, None))
            first = (v.start_byte - base, v.end_byte - base) if v is not None else None
            out[name] = (count + 1, span if count else first)
    return MappingProxyType(out)


class _BySubtreeText:
    """A node as a cache key: its type and source text (the same text parses to the same subtree
    wherever it stands in a kernel, and the operators ask about the same bodies again and again)."""

    __slots__ = ("node", "key")

    def __init__(self, node: ts.Node) -> None:
        self.node = node
        self.key = (node.type, node.text)

    def __hash__(self) -> int:
        return hash(self.key)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _BySubtreeText) and self.key == other.key


def written_names(node: ts.Node, *, through_access: bool = False) -> set[str]:
    """Identifiers written under `node`: assignment targets and ++/--. With `through_access`, also
    the variable a written element or field belongs to (`a` in `a[i] = v`, `s.x++`) and names
    whose address is taken (`&x`: the callee may write it)."""
    return set(_written_names(_BySubtreeText(node), through_access))


@lru_cache(maxsize=1024)
def _written_names(keyed: _BySubtreeText, through_access: bool) -> frozenset[str]:
    out: set[str] = set()
    for n in walk(keyed.node):
        target = None
        if n.type == "assignment_expression":
            target = n.child_by_field_name("left")
        elif n.type == "update_expression":
            target = n.child_by_field_name("argument")
        elif through_access and n.type == "pointer_expression" and n.children and n.children[0].type == "&":
            target = n.child_by_field_name("argument")
        while (
            through_access
            and target is not None
            and target.type in ("subscript_expression", "field_expression", "parenthesized_expression")
        ):
            target = target.child_by_field_name("argument") or (
                target.named_children[0] if target.named_children else None
            )
        if target is not None and target.type == "identifier" and target.text:
            out.add(target.text.decode())
    return frozenset(out)


def writes_to(node: ts.Node, name: str) -> list[ts.Node]:
    """The assignments and ++/-- under `node` whose target is the identifier `name` itself."""
    out = []
    for n in walk(node):
        target = None
        if n.type == "assignment_expression":
            target = n.child_by_field_name("left")
        elif n.type == "update_expression":
            target = n.child_by_field_name("argument")
        if target is not None and target.type == "identifier" and target.text == name.encode():
            out.append(n)
    return out


def assigned_in(node: ts.Node) -> set[str]:
    """Identifiers written under `node` (assignment targets, ++/--)."""
    return written_names(node)


def ancestors(node: ts.Node, stop: ts.Node | None = None) -> list[ts.Node]:
    """The nodes above `node`, nearest first, up to (not including) `stop`."""
    out, p = [], node.parent
    while p is not None and p != stop:
        out.append(p)
        p = p.parent
    return out


def statement_ancestor(node: ts.Node) -> ts.Node:
    p: ts.Node | None = node
    while p is not None and not (p.type.endswith("_statement") or p.type == "declaration"):
        p = p.parent
    return p or node


def uses_ident(node: ts.Node, name: str) -> bool:
    return any(n.type == "identifier" and n.text == name.encode() for n in walk(node))


def has_call(node: ts.Node, pattern: str) -> bool:
    return bool(calls_named(node, pattern))


def jumps_out(loop: ts.Node) -> list[ts.Node]:
    """`break`/`continue` bound to `loop`, and every `return` under it."""
    out = []
    for n in walk(loop.child_by_field_name("body") or loop):
        if n.type == "return_statement":
            out.append(n)
        elif n.type in ("break_statement", "continue_statement"):
            p = n.parent
            while (
                p is not None
                and p != loop
                and p.type
                not in (
                    "for_statement",
                    "while_statement",
                    "do_statement",
                    "for_range_loop",
                    "switch_statement",
                )
            ):
                p = p.parent
            if p == loop or (
                p is not None
                and p.type == "switch_statement"
                and n.type == "continue_statement"
                and bound_loop(p) == loop
            ):
                out.append(n)
    return out


def bound_loop(node: ts.Node) -> ts.Node | None:
    p = node.parent
    while p is not None and p.type not in (
        "for_statement",
        "while_statement",
        "do_statement",
        "for_range_loop",
    ):
        p = p.parent
    return p


@dataclass(frozen=True)
class IntConstant:
    name: str
    value: int
    start: int  # the literal's byte range
    end: int
    node: ts.Node | None  # the declaration (None for #define)
    kind: str  # constexpr | define | template


def int_constants(src: CudaSource) -> list[IntConstant]:
    """Integer `constexpr`/`const` literals and `#define`s of the file, with the literal's byte range
    (where a size is changed) and its declaration (the tuning operators' sizes)."""
    out = []
    for d in src.nodes_of_type("declaration"):
        quals = {
            src.text_of(c) for c in d.children if c.type in ("type_qualifier", "storage_class_specifier")
        }
        if not quals & {"constexpr", "const"}:
            continue
        ty = d.child_by_field_name("type")
        if ty is None or not re.fullmatch(
            r"(unsigned\s+)?(int|long|unsigned|size_t|int32_t|uint32_t)", src.text_of(ty)
        ):
            continue
        for dd in d.children_by_field_name("declarator"):
            if dd.type != "init_declarator":
                continue
            name = declarator_ident(dd)
            v = dd.child_by_field_name("value")
            if not name or v is None or v.type != "number_literal":
                continue
            val = eval_int(src.text_of(v), {})
            if val is not None:
                out.append(IntConstant(name, val, v.start_byte, v.end_byte, d, "constexpr"))
    for m in re.finditer(rb"^[ \t]*#[ \t]*define[ \t]+(\w+)[ \t]+\(?(\d+)\)?[ \t]*$", src.text_bytes, re.M):
        out.append(IntConstant(m.group(1).decode(), int(m.group(2)), m.start(2), m.end(2), None, "define"))
    return sorted(out, key=lambda c: c.start)
