"""The canonicalizer's rule protocol and its fixed-point driver.

A rule is one small semantics-preserving rewrite (a while loop as a counting `for`, a
cooperative-groups barrier as `__syncthreads()`, ...), a class with no state, like a libcst
codemod. `rewrite` changes every site it finds in one batch of non-overlapping edits and returns
None when it finds none; `canonicalize` runs the rules in order until none changes the file.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import ClassVar

import tree_sitter as ts

from klineage.errors import SourceError
from klineage.source.edit import Edit, apply_edits
from klineage.source.model import CudaSource

#: rounds of the whole rule list before the driver gives up (each round that changes nothing ends it)
MAX_ROUNDS = 16


class Rule(ABC):
    """One canonicalizing rewrite. `edits` lists its changes for the whole file (may be empty)."""

    name: ClassVar[str]
    #: what the rule makes canonical, in words (recorded with the canonical step)
    summary: ClassVar[str]

    @abstractmethod
    def edits(self, src: CudaSource) -> list[Edit]:
        """Non-overlapping edits bringing every site of this rule to canonical form."""

    def rewrite(self, src: CudaSource) -> CudaSource | None:
        """The file with this rule's sites rewritten, or None when it has none (or an edit would
        not parse: a rule never leaves a file it cannot read back)."""
        edits = self.edits(src)
        if not edits:
            return None
        try:
            out = apply_edits(src, edits)
        except SourceError:
            return None
        return out if out.text != src.text else None


def host_functions(src: CudaSource) -> Iterator[ts.Node]:
    """The syntax nodes of the file's host code (launchers and other host functions), where the
    launch-side rules look."""
    for f in src.functions:
        if f.kind in ("launcher", "host"):
            yield src.node_for(f)


@dataclass(frozen=True)
class Canonical:
    """The canonical form of a file and the rules that changed it, in the order they did."""

    source: CudaSource
    applied: tuple[str, ...]

    @property
    def changed(self) -> bool:
        return bool(self.applied)


def canonicalize(src: CudaSource, rules: Sequence[Rule]) -> Canonical:
    """Run `rules` in order, again and again, until a whole round changes nothing."""
    applied: list[str] = []
    for _ in range(MAX_ROUNDS):
        changed = False
        for rule in rules:
            new = rule.rewrite(src)
            if new is not None:
                src, changed = new, True
                applied.append(rule.name)
        if not changed:
            break
    return Canonical(src, tuple(applied))
