"""The producer's score lambda in (row, key) coordinates, for flash_fusion's tensor-core kernel.

The fused kernel calls the producer's value lambda with the scratch index `row * L + key` (L the
key count, 0 <= key < L), and a naive producer takes that index apart again: `idx % L` is the key,
`idx / L` the row, each a 64-bit division per score. Written with the two coordinates passed in,
the same statements need no division for the key and one per row (shared by the row's keys) for
anything derived from the row. Each `idx % L` and `idx / L` whose operands are exactly those (not
the right operand of a `*`, `/`, `%`, a cast or a unary minus, not followed by a call, subscript or
member access) becomes the coordinate, cast to the expression's own type; the index itself stays
defined (`row * L + key`) for every other use, so statements that use it otherwise are unchanged.
Nothing is rewritten when the index or L is assigned in the lambda's statements.
"""

from __future__ import annotations

import re

from klineage.deopt import _threads as T
from klineage.deopt._flash_emit import lam
from klineage.deopt._three_phase import ThreePhase

_BEFORE = set("(=,+?:<>[{;|&")  # a preceding character after which `idx op L` is its own operand


def _own_operand(text: str, start: int, end: int) -> bool:
    before, after = text[:start].rstrip(), text[end:].lstrip()
    if before.endswith("->") or (before and before[-1] not in _BEFORE and not before.endswith("return")):
        return False
    return not re.match(r"(?:[\[(.]|->|\+\+|--)", after)


def _rewrite(text: str, idx: str, length: str) -> str:
    pat = re.compile(rf"\b{re.escape(idx)}\s*([%/])\s*{re.escape(length)}\b")

    def sub(m: re.Match[str]) -> str:
        if not _own_operand(m.string, m.start(), m.end()):
            return m.group(0)
        coord = "kl_aj" if m.group(1) == "%" else "kl_ar"
        return f"((decltype({m.group(0)})){coord})"

    return pat.sub(sub, text)


def _written(name: str, text: str) -> bool:
    return bool(re.search(rf"\b{name}\s*(?:[-+*/%&|^]?=(?!=)|\+\+|--)|(?:\+\+|--|&)\s*{name}\b", text))


def row_key_lambda(tp: ThreePhase) -> str | None:
    """`kl_vrk(row, key, acc)`: the producer's value at scratch index `row * L + key`, with the
    index arithmetic read in coordinates; None when nothing reads that way."""
    p = tp.producer
    length, idx = T.strip_casts(tp.length).strip("()"), p.k.tid
    if not re.fullmatch(r"[A-Za-z_]\w*", length):
        return None
    body = "\n".join((*p.prelude, p.value))
    if _written(idx, body) or _written(length, body):
        return None
    stmts = tuple(_rewrite(s, idx, length) for s in p.prelude)
    value = _rewrite(p.value, idx, length)
    if stmts == p.prelude and value == p.value:
        return None
    it = p.k.tid_type
    decl = f"const {it} {idx} = ({it})(kl_ar * kl_len + kl_aj);"
    args = f"long long kl_ar, long long kl_aj, float {p.acc}"
    return lam("kl_vrk", args, "float", (decl, *stmts), "-INFINITY", f"return {value};")
