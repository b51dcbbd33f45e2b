"""Line diffs between neighbouring states, as (kind, text) pairs the template colours; the text
is escaped by the template, never here."""

from __future__ import annotations

import difflib
from dataclasses import dataclass


@dataclass(frozen=True)
class DiffLine:
    kind: str  # add | del | hunk | file | ctx
    text: str


def diff_lines(
    before: str, after: str, before_name: str, after_name: str, context: int = 3
) -> list[DiffLine]:
    """A unified diff from `before` to `after`; empty when they are equal."""
    out = []
    for line in difflib.unified_diff(
        before.splitlines(), after.splitlines(), before_name, after_name, n=context, lineterm=""
    ):
        out.append(DiffLine(classify(line), line))
    return out


def classify(line: str) -> str:
    if line.startswith(("+++", "---")):
        return "file"
    if line.startswith("@@"):
        return "hunk"
    if line.startswith("+"):
        return "add"
    if line.startswith("-"):
        return "del"
    return "ctx"


def carrier_lines(carrier: str) -> list[DiffLine]:
    """A skill's carrier (already a unified diff sketch) split for colouring."""
    return [DiffLine(classify(line), line) for line in carrier.splitlines()]
