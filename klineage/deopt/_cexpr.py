"""Expression-level helpers shared by the intrinsic, memory and shared-memory operators.

The source model answers questions about constructs (kernels, loops, shared declarations); these
operators also need small facts about expressions: the calls of a family inside one function,
whether an operand must be parenthesized when text is substituted, and the declared type of a name
(enough type inference to tell float from double and __half2 from __nv_bfloat162).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass

import tree_sitter as ts

from klineage.source import memo
from klineage.source import nodes as N
from klineage.source.model import CudaSource
from klineage.source.syntax import (  # noqa: F401  (re-exported: the operators read them as C.<name>)
    call_args,
    walk,
    written_names,
)
from klineage.source.syntax import call_name as callee_name  # noqa: F401  (re-exported)
from klineage.source.syntax import statement_ancestor as statement_of  # noqa: F401  (re-exported)

#: expressions that never need parentheses when their text is substituted into another expression
PRIMARY = frozenset(
    {
        "identifier",
        "number_literal",
        "call_expression",
        "subscript_expression",
        "field_expression",
        "parenthesized_expression",
        "qualified_identifier",
        "true",
        "false",
        "char_literal",
        "string_literal",
        "this",
    }
)
#: parents in which a substituted expression needs no outer parentheses
_LOOSE_PARENTS = frozenset(
    {
        "argument_list",
        "init_declarator",
        "parenthesized_expression",
        "return_statement",
        "expression_statement",
        "subscript_argument_list",
        "initializer_list",
        "condition_clause",
    }
)


def calls_in(node: ts.Node, names: Iterable[str] | Callable[[str], bool]) -> list[ts.Node]:
    """Calls (not launches) under `node` whose callee is in `names` (or satisfies it), source order."""
    match = names if callable(names) else frozenset(names).__contains__
    return [
        n
        for n in walk(node)
        if n.type == "call_expression" and N.kernel_call_syntax(n) is None and match(callee_name(n))
    ]


def code_functions(src: CudaSource) -> list[ts.Node]:
    """Definitions of kernels and device functions (where device code lives), source order."""
    return [src.node_for(f) for f in src.functions if f.kind in ("kernel", "device")]


def body_of(fn: ts.Node) -> ts.Node | None:
    return fn.child_by_field_name("body")


def text(src: CudaSource, node: ts.Node) -> str:
    return src.text_of(node)


def wrap(src: CudaSource, node: ts.Node) -> str:
    """The text of `node`, parenthesized unless it is a primary expression."""
    t = src.text_of(node)
    return t if node.type in PRIMARY else f"({t})"


def wrap_text(t: str) -> str:
    """Parenthesize expression text unless it is a plain name, number or call-like primary."""
    s = t.strip()
    if re.fullmatch(r"[\w.]+", s) or re.fullmatch(r"[\w:]+\([^()]*\)", s):
        return s
    return f"({s})"


def needs_outer_parens(node: ts.Node) -> bool:
    """True when text replacing `node` must be parenthesized to keep its grouping."""
    p = node.parent
    return (
        p is not None
        and p.type not in _LOOSE_PARENTS
        and not (p.type == "assignment_expression" and p.child_by_field_name("right") == node)
    )


def identifiers(node: ts.Node) -> set[str]:
    """Plain identifiers used under `node` (field names excluded)."""
    return {n.text.decode() for n in walk(node) if n.type == "identifier" and n.text is not None}


def enclosing(node: ts.Node, *types: str) -> ts.Node | None:
    p = node.parent
    while p is not None and p.type not in types:
        p = p.parent
    return p


enclosing_function = N.enclosing_function


def declarator_name(d: ts.Node | None) -> tuple[str | None, bool, ts.Node | None]:
    """(name, is_pointer_or_array, identifier node) of a declarator."""
    ptr = False
    while d is not None and d.type not in ("identifier", "field_identifier"):
        if d.type in ("pointer_declarator", "array_declarator", "abstract_pointer_declarator"):
            ptr = True
        if d.type == "reference_declarator":
            d = next((c for c in d.named_children), None)
            continue
        d = d.child_by_field_name("declarator")
    return (d.text.decode() if d is not None and d.text else None), ptr, d


#: (base type text, is pointer/array) of a declared name
Declared = tuple[str, bool]
#: a function's span (start, end byte): the key of its declarations, the same in every parse of a text
Span = tuple[int, int]


@dataclass(frozen=True)
class Declarations:
    """Every declaration of a text, indexed once: the last one of each name inside each function
    (nested scopes included) and anywhere in the file. `declared_type` is asked thousands of
    times per materializer run on a handful of texts; walking the whole tree for each question
    was the loop's hottest path."""

    in_function: dict[Span, dict[str, Declared]]
    anywhere: dict[str, Declared]


def _span(n: ts.Node) -> Span:
    return (n.start_byte, n.end_byte)


@memo.per_text(maxsize=64)
def declarations(src: CudaSource) -> Declarations:
    """The declaration index of `src` (see `Declarations`), in source order: a later one wins."""
    in_function: dict[Span, dict[str, Declared]] = {}
    anywhere: dict[str, Declared] = {}
    for n in walk(src.tree.root_node):
        if n.type not in ("parameter_declaration", "declaration", "field_declaration"):
            continue
        t = n.child_by_field_name("type")
        if t is None:
            continue
        quals = " ".join(src.text_of(c) for c in n.children if c.type == "type_qualifier")
        fns = []
        f = enclosing_function(n)
        while f is not None:
            fns.append(in_function.setdefault(_span(f), {}))
            f = enclosing_function(f)
        for d in n.children_by_field_name("declarator"):
            target = d.child_by_field_name("declarator") if d.type == "init_declarator" else d
            nm, ptr, _ = declarator_name(target)
            if nm is None:
                continue
            found = (f"{quals} {src.text_of(t)}".strip(), ptr)
            anywhere[nm] = found
            for index in fns:
                index[nm] = found
    return Declarations(in_function, anywhere)


def declared_type(src: CudaSource, scope: ts.Node, name: str) -> Declared | None:
    """(base type text, is pointer/array) of the last declaration of `name` in `scope` or the file.

    Looks at parameters and local declarations of the enclosing function first, then at every
    declaration of the file (other functions' locals included: the rule the operators were
    written against). Good enough to tell float from double and half2 from bfloat162; None if
    unknown.
    """
    fn = scope if scope.type == "function_definition" else enclosing_function(scope)
    index = declarations(src)
    local = index.in_function.get(_span(fn), {}) if fn is not None else {}
    return local.get(name) or index.anywhere.get(name)


_FLOAT_LIT = re.compile(r"^[0-9.]+(?:[eE][-+]?\d+)?[fF]$|^[0-9]*\.?[0-9]+(?:[eE][-+]?\d+)?[fF]$")
_DOUBLE_LIT = re.compile(r"^(?:\d+\.\d*|\.\d+|\d+(?=[eE]))(?:[eE][-+]?\d+)?$")
_FLOAT_FUNCS = re.compile(
    r"^(?:__)?(?:expf|exp2f|exp10f|logf|log2f|log10f|sinf|cosf|tanf|powf|sqrtf|rsqrtf|"
    r"fmaf|fmaxf|fminf|fabsf|tanhf|erff|__fdividef|__frcp_rn|__fmaf_rn|__fsqrt_rn|"
    r"__half2float|__bfloat162float|__low2float|__high2float|__int2float_rn|"
    r"__shfl_\w+|__saturatef|__fadd_rn|__fmul_rn|copysignf|floorf|ceilf|roundf|truncf)$"
)


def scalar_type(src: CudaSource, node: ts.Node) -> str | None:
    """'float', 'double', 'int' or another base type name for simple expressions; None if unsure."""
    t = node.type
    if t == "parenthesized_expression":
        inner = node.named_children
        return scalar_type(src, inner[0]) if inner else None
    if t == "number_literal":
        s = src.text_of(node)
        if _FLOAT_LIT.match(s):
            return "float"
        if _DOUBLE_LIT.match(s):
            return "double"
        return "int"
    if t == "identifier":
        d = declared_type(src, node, src.text_of(node))
        if d is None or d[1]:
            return None
        return _base_name(d[0])
    if t == "subscript_expression":
        arg = node.child_by_field_name("argument")
        if arg is not None and arg.type == "identifier":
            d = declared_type(src, node, src.text_of(arg))
            if d is not None and d[1]:
                return _base_name(d[0])
        return None
    if t == "field_expression":
        arg = node.child_by_field_name("argument")
        field = node.child_by_field_name("field")
        base = scalar_type(src, arg) if arg is not None else None
        if base in ("float2", "float4") and field is not None and src.text_of(field) in "xyzw":
            return "float"
        return None
    if t == "call_expression":
        name = callee_name(node)
        if _FLOAT_FUNCS.match(name):
            return "float"
        if name.startswith("static_cast") or name.startswith("float"):
            return "float" if "float" in src.text_of(node.child_by_field_name("function")) else None
        return None
    if t == "cast_expression":
        ty = node.child_by_field_name("type")
        return _base_name(src.text_of(ty)) if ty is not None else None
    if t == "unary_expression":
        arg = node.child_by_field_name("argument")
        return scalar_type(src, arg) if arg is not None else None
    if t == "binary_expression":
        a, b = node.child_by_field_name("left"), node.child_by_field_name("right")
        ta = scalar_type(src, a) if a is not None else None
        tb = scalar_type(src, b) if b is not None else None
        if "double" in (ta, tb):
            return "double"
        if ta == "float" and tb in ("float", "int"):
            return "float"
        if tb == "float" and ta in ("float", "int"):
            return "float"
        if ta == tb:
            return ta
        return None
    if t == "conditional_expression":
        a, b = node.child_by_field_name("consequence"), node.child_by_field_name("alternative")
        ta = scalar_type(src, a) if a is not None else None
        tb = scalar_type(src, b) if b is not None else None
        return ta if ta == tb else None
    return None


def _base_name(type_text: str) -> str:
    words = [
        w
        for w in re.findall(r"[\w:]+", type_text)
        if w
        not in (
            "const",
            "volatile",
            "__restrict__",
            "__restrict",
            "static",
            "constexpr",
            "__shared__",
            "register",
            "unsigned",
            "signed",
        )
    ]
    base = words[-1] if words else type_text
    if base in ("int", "long", "short", "char") or "unsigned" in type_text.split():
        return "int" if base != "char" else "char"
    return base


def has_side_effects(node: ts.Node) -> bool:
    """Assignments, ++/-- or calls other than pure math under `node` (duplicating it is unsafe)."""
    for n in walk(node):
        if n.type in ("assignment_expression", "update_expression"):
            return True
        if n.type == "call_expression":
            name = callee_name(n)
            if name.startswith(("atomic", "__shfl", "__syncthreads", "printf", "__ballot")):
                return True
    return False


def assigned_names(node: ts.Node) -> set[str]:
    """Names written under `node`: assignment targets, ++/--, and names whose address is taken."""
    return written_names(node, through_access=True)


def declarations_in(node: ts.Node) -> dict[str, list[ts.Node]]:
    """name -> declaration nodes under `node` that declare it."""
    out: dict[str, list[ts.Node]] = {}
    for n in walk(node):
        if n.type != "declaration":
            continue
        for d in n.children_by_field_name("declarator"):
            target = d.child_by_field_name("declarator") if d.type == "init_declarator" else d
            nm, _, _ = declarator_name(target)
            if nm:
                out.setdefault(nm, []).append(n)
    return out


def render(src: CudaSource, node: ts.Node, rewrite: Callable[[ts.Node], str | None]) -> str:
    """The text of `node` with every descendant for which `rewrite` returns text replaced by it.

    `rewrite` is asked top-down; a node it rewrites is not descended into (the rewrite may call
    `render` on its own children to handle nesting).
    """
    r = rewrite(node)
    if r is not None:
        return r
    if not node.children:
        return src.text_of(node)
    parts, pos = [], node.start_byte
    for c in node.children:
        parts.append(src.text_bytes[pos : c.start_byte].decode("utf-8"))
        parts.append(render(src, c, rewrite))
        pos = c.end_byte
    parts.append(src.text_bytes[pos : node.end_byte].decode("utf-8"))
    return "".join(parts)


def outermost(nodes: Iterable[ts.Node]) -> list[ts.Node]:
    """The nodes not contained in another node of the list."""
    ns = sorted(nodes, key=lambda n: (n.start_byte, -n.end_byte))
    out: list[ts.Node] = []
    for n in ns:
        if out and n.start_byte >= out[-1].start_byte and n.end_byte <= out[-1].end_byte:
            continue
        out.append(n)
    return out


def pointer_base(node: ts.Node) -> ts.Node | None:
    """The identifier a pointer expression is based on: `p`, `p + i`, `&p[i]`, `p4 + i` -> p."""
    n: ts.Node | None = node
    while n is not None:
        if n.type == "identifier":
            return n
        if n.type == "pointer_expression":
            n = n.child_by_field_name("argument")
        elif n.type == "subscript_expression":
            n = n.child_by_field_name("argument")
        elif n.type == "binary_expression":
            n = n.child_by_field_name("left")
        elif n.type == "parenthesized_expression":
            n = n.named_children[0] if n.named_children else None
        else:
            return None
    return None


# ---- inline PTX and file layout ---------------------------------------------------------------


def after_includes(src: CudaSource) -> int:
    """The byte offset just past the file's last `#include` line (0 without one): where an
    operator inserts a helper it needs once per file."""
    last = 0
    for m in re.finditer(r"^[ \t]*#[ \t]*include[^\n]*\n", src.text, re.M):
        last = m.end()
    return len(src.text[:last].encode("utf-8"))


def asm_template(src: CudaSource, asm: ts.Node) -> str:
    """The PTX text of an inline-asm expression, its string pieces joined, `\\n` and `\\t`
    unescaped ("" when the template is not a literal)."""
    lit = next((c for c in asm.children if c.type in ("string_literal", "concatenated_string")), None)
    if lit is None:
        return ""
    parts = re.findall(r'"((?:\\.|[^"\\])*)"', src.text_of(lit))
    return "".join(parts).replace("\\n", "\n").replace("\\t", " ")


@dataclass(frozen=True)
class AsmOperand:
    """One operand of an inline-asm expression: its constraint (`+f`, `r`, `n`) and C expression."""

    constraint: str
    expr: str


def asm_operands(src: CudaSource, asm: ts.Node) -> list[AsmOperand]:
    """The outputs then the inputs of an inline-asm expression, in `%N` order."""
    out: list[AsmOperand] = []
    for kind in ("gnu_asm_output_operand", "gnu_asm_input_operand"):
        lst = next((c for c in asm.children if c.type == kind + "_list"), None)
        for op in lst.named_children if lst is not None else []:
            if op.type != kind:
                continue
            con = next((c for c in op.named_children if c.type == "string_literal"), None)
            value = op.child_by_field_name("value") or op.named_children[-1]
            constraint = src.text_of(con).strip('"') if con is not None else ""
            out.append(AsmOperand(constraint, src.text_of(value)))
    return out


@dataclass(frozen=True)
class AsmRewrite:
    """An inline-asm statement and the text that replaces it ("" deletes it); `why` set: the
    statement is one the operator knows but will not rewrite, and says why."""

    stmt: ts.Node
    text: str
    why: str = ""


def asm_operand(ops: list[AsmOperand], token: str) -> AsmOperand | None:
    """The operand a template token `%N` names (None for anything else or a number out of range)."""
    m = re.fullmatch(r"\s*%(\d+)\s*", token)
    return ops[int(m.group(1))] if m is not None and int(m.group(1)) < len(ops) else None


def asm_statement(asm: ts.Node) -> ts.Node:
    """The statement an inline-asm expression stands in (itself when it is not a statement)."""
    return asm.parent if asm.parent is not None and asm.parent.type == "expression_statement" else asm


#: a fence between the generic proxy's shared-memory writes and the async proxy's reads (a wgmma's
#: operands, a TMA store's source): needed only while the file has an async-proxy reader
ASYNC_PROXY_FENCE = re.compile(r"^\s*fence\.proxy\.async(?:\.shared::(?:cta|cluster)|\.global)?\s*;?\s*$")


def async_proxy_fences(src: CudaSource) -> list[ts.Node]:
    """The statements of device code that hold only an async-proxy fence."""
    return [
        asm_statement(n)
        for fn in code_functions(src)
        for n in walk(fn)
        if n.type == "gnu_asm_expression" and ASYNC_PROXY_FENCE.match(asm_template(src, n))
    ]
