"""Text normalization for equivalence checks: two sources that differ only in layout compare equal."""

from __future__ import annotations

import re

_TOKENS = re.compile(
    r'"(?:\\.|[^"\\\n])*"'  # string literal: kept verbatim
    r"|'(?:\\.|[^'\\\n])*'"  # char literal
    r"|//[^\n]*"  # line comment
    r"|/\*.*?\*/",  # block comment
    re.S,
)
_WS = re.compile(r"\s+")
_WORD = re.compile(r"\w")
_SAME_OP = set("+-&|<>=/:")


def normalize(text: str) -> str:
    """Comments removed, whitespace runs collapsed, and spaces dropped unless they separate tokens.

    A space stays only between two word characters (`unsigned int`) or two identical operator
    characters (`a - -b`), so `x[i]+1` and `x[ i ] + 1` normalize alike. String literals are kept
    as written.
    """
    parts = _TOKENS.split(text)
    literals = [m.group(0) for m in _TOKENS.finditer(text)]
    out: list[str] = []
    for i, part in enumerate(parts):
        out.append(part)
        if i < len(literals):
            lit = literals[i]
            out.append(" " if lit[:2] in ("//", "/*") else "\0" + str(i) + "\0")
    flat = _WS.sub(" ", "".join(out)).strip()
    chars = []
    for j, ch in enumerate(flat):
        if ch == " ":
            a, b = flat[j - 1], flat[j + 1]
            if not ((_WORD.match(a) and _WORD.match(b)) or (a == b and a in _SAME_OP)):
                continue
        chars.append(ch)
    squeezed = "".join(chars)
    return re.sub(r"\0(\d+)\0", lambda m: literals[int(m.group(1))], squeezed)
