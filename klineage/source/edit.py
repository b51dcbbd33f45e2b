"""Byte-range edits of a CudaSource, each batch followed by a re-parse that must stay clean.

Operators build `Edit`s with the helpers (replace, insert before/after, delete a node) and apply
them together; offsets always refer to the source the edits were built from.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

import tree_sitter as ts

from klineage.errors import SourceError
from klineage.source.constructs import Construct
from klineage.source.mask import Attribute
from klineage.source.model import CudaSource
from klineage.source.text import normalize

__all__ = [
    "Edit",
    "apply_edits",
    "replace",
    "insert_before",
    "insert_after",
    "delete",
    "lines_of",
    "indent_of",
    "reindent",
    "normalize",
]

Target = ts.Node | Construct | Attribute


@dataclass(frozen=True)
class Edit:
    """Replace bytes [start, end) of the UTF-8 text with `replacement` (start == end inserts)."""

    start: int
    end: int
    replacement: str

    def __post_init__(self) -> None:
        if not 0 <= self.start <= self.end:
            raise SourceError(f"bad edit range {self.start}-{self.end}")


def _range(target: Target) -> tuple[int, int]:
    if isinstance(target, ts.Node):
        return target.start_byte, target.end_byte
    return target.start, target.end


def apply_edits(src: CudaSource, edits: Iterable[Edit]) -> CudaSource:
    """Apply non-overlapping edits at once and re-parse.

    Overlapping edits (two touching the same bytes, or two inserts at one offset) are refused,
    as is a result that no longer parses; the SourceError names the edit's line.
    """
    ordered = sorted(edits, key=lambda e: (e.start, e.end))
    data = src.text_bytes
    for a, b in zip(ordered, ordered[1:], strict=False):
        if b.start < a.end or a.start == a.end == b.start == b.end:
            raise SourceError(
                f"{src.path}:{src.line_of(b.start)}: overlapping edits at bytes {a.start}-{a.end} and {b.start}-{b.end}"
            )
    if ordered and ordered[-1].end > len(data):
        raise SourceError(f"{src.path}: edit ends at byte {ordered[-1].end}, past the end ({len(data)})")
    for e in ordered:
        for pos in (e.start, e.end):
            if pos < len(data) and (data[pos] & 0xC0) == 0x80:
                raise SourceError(
                    f"{src.path}:{src.line_of(pos)}: edit splits a UTF-8 character at byte {pos}"
                )
    parts, last = [], 0
    for e in ordered:
        parts += [data[last : e.start], e.replacement.encode("utf-8")]
        last = e.end
    parts.append(data[last:])
    text = b"".join(parts).decode("utf-8")
    try:
        return CudaSource.from_text(text, src.path)
    except SourceError as err:
        lines = sorted({src.line_of(e.start) for e in ordered})
        where = ", ".join(str(n) for n in lines)
        raise SourceError(f"edit at line {where} refused: {err}") from None


def replace(target: Target, text: str) -> Edit:
    """Replace a node's (or construct's) text."""
    start, end = _range(target)
    return Edit(start, end, text)


def swap(src: CudaSource, a: ts.Node, b: ts.Node) -> list[Edit]:
    """Two disjoint nodes exchange their texts (an operator that is its own inverse: a tile's two
    dimensions, two grid axes)."""
    return [replace(a, src.text_of(b)), replace(b, src.text_of(a))]


def insert_before(target: Target, text: str) -> Edit:
    """Insert `text` right before a node; include your own newline/indent."""
    start, _ = _range(target)
    return Edit(start, start, text)


def insert_after(target: Target, text: str) -> Edit:
    """Insert `text` right after a node."""
    _, end = _range(target)
    return Edit(end, end, text)


def delete(src: CudaSource, target: Target) -> Edit:
    """Delete a node; when it is alone on its line(s), the whole line(s) go, newline included."""
    start, end = _range(target)
    data = src.text_bytes
    line_start = data.rfind(b"\n", 0, start) + 1
    nl = data.find(b"\n", end)
    line_end = len(data) if nl < 0 else nl + 1
    if not data[line_start:start].strip() and not data[end:line_end].strip():
        return Edit(line_start, line_end, "")
    return Edit(start, end, "")


def lines_of(src: CudaSource, target: Target) -> tuple[int, int]:
    """Byte range of the full lines a node spans (to indent or comment out a whole statement)."""
    start, end = _range(target)
    data = src.text_bytes
    nl = data.find(b"\n", end)
    return data.rfind(b"\n", 0, start) + 1, (len(data) if nl < 0 else nl + 1)


def reindent(lines: Iterable[str], old: str, new: str = "") -> list[str]:
    """The lines moved from indentation `old` to `new`: a line starting with `old` has it replaced
    by `new`, any other line (less indented, a pragma at column 0) is kept as it is."""
    return [new + ln[len(old) :] if ln.startswith(old) else ln for ln in lines]


def indent_of(src: CudaSource, target: Target) -> str:
    """The leading whitespace of the line a node starts on (to indent inserted code alike)."""
    start, _ = _range(target)
    line_start = src.text_bytes.rfind(b"\n", 0, start) + 1
    head = src.text_bytes[line_start:start].decode("utf-8")
    return head[: len(head) - len(head.lstrip())]
