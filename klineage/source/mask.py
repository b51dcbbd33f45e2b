"""Grammar gaps of tree-sitter-cuda, blanked out before parsing so real kernels parse.

The grammar rejects `__align__(16)`, `[=] __device__ (...)` lambdas and a `#pragma` that is the
body of a brace-less loop (common in unrolled GEMM loops). Each gap is replaced by spaces of the
same length, so every byte offset of the parse tree still points into the original text; pragma
lines are reported separately and re-attached to their loops by the model.
"""

from __future__ import annotations

import re

_ALIGN = re.compile(rb"__align__\s*\([^()\n]*\)")
_LAMBDA_SPACE = re.compile(rb"\]\s*((?:__(?:host|device)__\s*)+)\(")
_PRAGMA_LINE = re.compile(rb"^[ \t]*(#[ \t]*pragma\b[^\r\n]*)", re.M)


def _blank(buf: bytearray, start: int, end: int) -> None:
    for i in range(start, end):
        if buf[i] not in (0x0A, 0x0D):
            buf[i] = 0x20


def mask(data: bytes) -> tuple[bytes, list[tuple[int, int]]]:
    """The bytes to parse (same length as `data`) and the (start, end) of each `#pragma` line."""
    buf = bytearray(data)
    for m in _ALIGN.finditer(data):
        _blank(buf, m.start(), m.end())
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
    return bytes(buf), pragmas
