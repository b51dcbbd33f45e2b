"""Integer polynomials over C identifiers: the algebra index analyses share.

A monomial is the sorted tuple of its factors' names (a name may repeat); a polynomial maps each
monomial to its nonzero integer coefficient, so equal polynomials compare equal as dicts. The
strided-copy analysis reads thread-index arithmetic into them; the tile-load analysis reads a
staging loop's addresses and guards into them to prove them affine in the tile's row and column.
"""

from __future__ import annotations

import ast
import keyword
import re
from collections.abc import Mapping

from klineage.source.syntax import paren

#: a monomial's factors (sorted identifier names); a polynomial maps factors -> integer coefficient
Factors = tuple[str, ...]
Poly = dict[Factors, int]


def const(v: int) -> Poly:
    return {(): v} if v else {}


def var(name: str) -> Poly:
    return {(name,): 1}


def add(a: Poly, b: Poly, sign: int = 1) -> Poly:
    out = dict(a)
    for k, v in b.items():
        out[k] = out.get(k, 0) + sign * v
        if out[k] == 0:
            del out[k]
    return out


def mul(a: Poly, b: Poly) -> Poly:
    out: Poly = {}
    for ka, va in a.items():
        for kb, vb in b.items():
            k = tuple(sorted(ka + kb))
            out[k] = out.get(k, 0) + va * vb
            if out[k] == 0:
                del out[k]
    return out


def mono(p: Poly) -> tuple[int, Factors] | None:
    """(coefficient, factors) when `p` is a single monomial."""
    if len(p) != 1:
        return None
    (k, v), *_ = p.items()
    return v, k


def div(a: Poly, b: Poly) -> Poly | None:
    """a / b when both are monomials and b divides a exactly, else None."""
    ma, mb = mono(a), mono(b)
    if ma is None or mb is None or mb[0] == 0 or ma[0] % mb[0]:
        return None
    rest = list(ma[1])
    for f in mb[1]:
        if f not in rest:
            return None
        rest.remove(f)
    return {tuple(rest): ma[0] // mb[0]}


def degree_in(p: Poly, name: str) -> int:
    """The highest power of `name` in any monomial of `p`."""
    return max((k.count(name) for k in p), default=0)


def part_with(p: Poly, name: str) -> Poly:
    """The monomials of `p` that have `name` as a factor."""
    return {k: v for k, v in p.items() if name in k}


def coefficient(p: Poly, name: str) -> Poly:
    """What multiplies `name` in `p` (one factor of it taken off each monomial that has it)."""
    out: Poly = {}
    for k, v in p.items():
        if name in k:
            rest = list(k)
            rest.remove(name)
            out = add(out, {tuple(rest): v})
    return out


def c_text(p: Poly, names: dict[str, str] | None = None) -> str:
    """A polynomial as C text over size_t (every product widened before it can overflow int)."""
    if not p:
        return "0"
    names = names or {}
    terms = []
    for k, v in sorted(p.items()):
        fs = [paren(names.get(f, f)) for f in k]
        if not fs:
            terms.append(f"(size_t){v}" if v >= 0 else f"-(size_t){-v}")
            continue
        body = " * ".join([f"(size_t){fs[0]}", *fs[1:]])
        terms.append(body if v == 1 else f"{v} * {body}" if v > 0 else f"-{-v} * {body}")
    return " + ".join(terms).replace("+ -", "- ")


#: a C integer type (words separated by single spaces; `const` taken off first)
_INT_TYPE = (
    r"(?:(?:unsigned|signed)\s+)?(?:long\s+long(?:\s+int)?|long(?:\s+int)?|short(?:\s+int)?|int|char"
    r"|size_t|ptrdiff_t|u?int(?:8|16|32|64)_t)|unsigned|signed"
)
_C_CAST = re.compile(rf"\(\s*(?:const\s+)?(?:{_INT_TYPE})\s*\)")
_STATIC_CAST = re.compile(rf"static_cast<\s*(?:const\s+)?(?:{_INT_TYPE})\s*>")
_LITERAL = re.compile(r"\b(0[xX][0-9a-fA-F]+|0[0-7]*|[1-9]\d*)[uUlL]*\b")


def is_int_type(text: str) -> bool:
    """Whether C type text names an integer type (`unsigned int`, `const long long`, `size_t`)."""
    return re.fullmatch(_INT_TYPE, " ".join(re.sub(r"\bconst\b", " ", text).split())) is not None


def _int_literal(digits: str) -> str:
    """A C integer literal's value as decimal text (hexadecimal, octal `017`, decimal)."""
    if digits[:2] in ("0x", "0X"):
        return str(int(digits, 16))
    return str(int(digits, 8) if digits.startswith("0") else int(digits))


def int_literal(text: str) -> int | None:
    """The value of one whole C integer literal (`42`, `0x2A`, octal `052`, any `u`/`l` suffix);
    None for anything else (a float, a name, `09`)."""
    m = _LITERAL.fullmatch(text.strip())
    return None if m is None else int(_int_literal(m.group(1)))


def from_c(text: str, env: Mapping[str, Poly | None] | None = None) -> Poly | None:
    """The polynomial of C integer text: names, fields of names (`threadIdx.x`, a by-value struct's
    member: fixed while the expression runs), integer literals, `+ - *`, parentheses and integer
    casts (`static_cast<int>(x)` too); a name in `env` stands for its polynomial there (None: not
    a polynomial), any other name for itself. None for anything else (division, other casts,
    calls, memory, `->`)."""
    t = _STATIC_CAST.sub("", _C_CAST.sub(" ", text))
    t = _LITERAL.sub(lambda m: _int_literal(m.group(1)), t)
    spelled: dict[str, str] = {}  # C names that are Python keywords, under another name

    def rename(m: re.Match[str]) -> str:
        if not keyword.iskeyword(m.group(0)):
            return m.group(0)
        spelled[f"_kl_c_{m.group(0)}"] = m.group(0)
        return f"_kl_c_{m.group(0)}"

    t = re.sub(r"\b[A-Za-z_]\w*\b", rename, t)
    try:
        tree = ast.parse(t.strip(), mode="eval")
    except SyntaxError:
        return None
    env = env or {}

    def name_of(n: ast.AST) -> str | None:
        if isinstance(n, ast.Name):
            return spelled.get(n.id, n.id)
        if isinstance(n, ast.Attribute):
            base = name_of(n.value)
            return None if base is None else f"{base}.{spelled.get(n.attr, n.attr)}"
        return None

    def walk(n: ast.AST) -> Poly | None:
        if isinstance(n, ast.Expression):
            return walk(n.body)
        if isinstance(n, ast.Constant) and type(n.value) is int:
            return const(n.value)
        if isinstance(n, ast.Name | ast.Attribute):
            name = name_of(n)
            return None if name is None else env[name] if name in env else var(name)
        if isinstance(n, ast.UnaryOp) and isinstance(n.op, (ast.USub, ast.UAdd)):
            a = walk(n.operand)
            return None if a is None else add({}, a, -1 if isinstance(n.op, ast.USub) else 1)
        if isinstance(n, ast.BinOp) and isinstance(n.op, (ast.Add, ast.Sub, ast.Mult)):
            a, b = walk(n.left), walk(n.right)
            if a is None or b is None:
                return None
            return (
                add(a, b)
                if isinstance(n.op, ast.Add)
                else add(a, b, -1)
                if isinstance(n.op, ast.Sub)
                else mul(a, b)
            )
        return None

    return walk(tree)
