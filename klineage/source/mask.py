"""Grammar gaps of tree-sitter-cuda, blanked out before parsing so real kernels parse.

The grammar rejects `__align__(16)`, `__cluster_dims__(2, 1, 1)`, `__maxnreg__(64)`, a
three-argument `__launch_bounds__`, `[=] __device__ (...)` lambdas, and a `#pragma` that is the
body of a brace-less loop (common in unrolled GEMM loops). Each is replaced by spaces of the same
length, so every byte offset of the parse tree still points into the original text. The attributes
and pragma lines are reported here and re-attached to their functions, declarations and loops by
the model.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_ATTRIBUTE = re.compile(rb"\b(__launch_bounds__|__cluster_dims__|__maxnreg__|__align__)\s*\(")
_LAMBDA_SPACE = re.compile(rb"\]\s*((?:__(?:host|device)__\s*)+)\(")
_PRAGMA_LINE = re.compile(rb"^[ \t]*(#[ \t]*pragma\b[^\r\n]*)", re.M)


@dataclass(frozen=True)
class Attribute:
    """`__launch_bounds__(256, 2)` and kin: name, argument texts, byte range of the whole attribute."""

    name: str
    args: tuple[str, ...]
    start: int
    end: int


@dataclass(frozen=True)
class Masked:
    """The bytes to parse (same length as the original) and what was blanked out of them."""

    data: bytes
    pragmas: tuple[tuple[int, int], ...]
    attributes: tuple[Attribute, ...]


def _blank(buf: bytearray, start: int, end: int) -> None:
    for i in range(start, end):
        if buf[i] not in (0x0A, 0x0D):
            buf[i] = 0x20


def _balanced(data: bytes, open_at: int) -> tuple[int, list[tuple[int, int]]] | None:
    """End of the parenthesized group opening at `open_at`, and its top-level comma-separated parts."""
    depth, parts, part_start = 0, [], open_at + 1
    for i in range(open_at, min(len(data), open_at + 2000)):
        ch = data[i]
        if ch in b"([{":
            depth += 1
        elif ch in b")]}":
            depth -= 1
            if depth == 0:
                parts.append((part_start, i))
                return i + 1, parts
        elif ch == 0x2C and depth == 1:
            parts.append((part_start, i))
            part_start = i + 1
    return None


def _attributes(data: bytes) -> list[Attribute]:
    out = []
    for m in _ATTRIBUTE.finditer(data):
        found = _balanced(data, m.end() - 1)
        if found is None:
            continue
        end, parts = found
        args = tuple(b" ".join(data[a:b].split()).decode("utf-8", "replace") for a, b in parts)
        out.append(Attribute(m.group(1).decode(), tuple(a for a in args if a), m.start(), end))
    return out


def mask(data: bytes) -> Masked:
    """Blank the grammar gaps of `data` (see the module doc)."""
    buf = bytearray(data)
    attributes = _attributes(data)
    for a in attributes:
        _blank(buf, a.start, a.end)
    for m in _LAMBDA_SPACE.finditer(data):
        _blank(buf, m.start(1), m.end(1))
    pragmas: list[tuple[int, int]] = []
    for m in _PRAGMA_LINE.finditer(data):
        start, end = m.start(1), m.end(1)
        line_start = m.start()
        if line_start >= 2 and data[line_start - 2 : line_start].rstrip(b"\r").endswith(b"\\"):
            continue  # continuation of a #define: part of the macro, not a pragma line
        end = start + len(data[start:end].rstrip())
        _blank(buf, start, end)
        pragmas.append((start, end))
    return Masked(bytes(buf), tuple(pragmas), tuple(attributes))
