"""De-optimization operators: one expert technique each, seen from both sides (DESIGN.md).

An operator finds the sites where its optimization is present (`find`), removes it at one site
(`remove`: the backward step the walker gates) and, where that can be done mechanically, applies
it (`apply`: the forward step the offline materializer and the roundtrip check use, at sites
from `find_forward`). Its `preconditions` are the static facts at a site that made the
optimization valid; they are recorded in skills, and a failing one refuses the edit with a reason.
Like libcst codemods, each operator is a small class with no state beyond its configuration.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

from klineage.errors import KLineageError
from klineage.source.anchor import Anchor
from klineage.source.model import CudaSource

#: The soft removal prior of DESIGN.md, first removed first: tuning and templates; then
#: pipelines, async copies and specialized instructions; then shared-memory layouts and staging;
#: then vectorization, matrix instructions and fusion; tiling last.
CATEGORIES: tuple[str, ...] = (
    "tuning",
    "template",
    "pipeline",
    "async_copy",
    "specialized_instruction",
    "smem_layout",
    "staging",
    "vectorization",
    "matrix_instruction",
    "fusion",
    "tiling",
)


#: the launcher's arguments at one problem size, in order: a scalar's value, None for a tensor
LaunchValues = tuple[int | float | None, ...]


class Refused(KLineageError):
    """The operator will not edit this site; the message says which condition failed."""


#: Kinds of precondition, as skill cards group them (the published SKILL.md prefixes).
PRECONDITION_KINDS = ("Data types", "Layout", "Storage", "Pipeline", "Hardware")


@dataclass(frozen=True)
class Precondition:
    """A static fact at a site: `holds` False refuses the edit, `reason` says why in words.
    `kind` is one of PRECONDITION_KINDS ("" lets the card exporter infer it from the name)."""

    name: str
    holds: bool
    reason: str
    kind: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "holds": self.holds, "reason": self.reason, "kind": self.kind}


@dataclass(frozen=True)
class Site:
    """Where an operator acts: the construct's anchor and byte range, plus operator details."""

    operator: str
    anchor: Anchor
    start: int
    end: int
    summary: str
    detail: tuple[tuple[str, str], ...] = field(default=())

    @property
    def details(self) -> Mapping[str, str]:
        return dict(self.detail)

    @property
    def line(self) -> int:
        return self.anchor.line

    def to_dict(self) -> dict[str, Any]:
        return {
            "operator": self.operator,
            "anchor": self.anchor.to_dict(),
            "start": self.start,
            "end": self.end,
            "summary": self.summary,
            "detail": dict(self.detail),
        }


class Operator(ABC):
    """Base class of rule operators. Subclasses set the class attributes and implement find/remove."""

    name: ClassVar[str]
    category: ClassVar[str]
    #: the forward optimization, in words (becomes the skill's intent)
    intent: ClassVar[str]
    #: True when `apply` is implemented (the forward step is mechanical)
    mechanical_apply: ClassVar[bool] = False

    # ---- backward ---------------------------------------------------------------------------
    @abstractmethod
    def find(self, src: CudaSource) -> list[Site]:
        """Sites where the optimization is present, in source order."""

    @abstractmethod
    def _remove(self, src: CudaSource, site: Site) -> CudaSource:
        """The simplification at one site (preconditions already checked)."""

    def remove(self, src: CudaSource, site: Site) -> CudaSource:
        """The simplification at `site`; Refused when a removal precondition fails."""
        self._check(self.removal_preconditions(src, site))
        return self._remove(src, site)

    def removal_preconditions(self, src: CudaSource, site: Site) -> list[Precondition]:
        """Facts that must hold for the removal to keep the function computed (default: none)."""
        return []

    # ---- forward ----------------------------------------------------------------------------
    def find_forward(self, src: CudaSource) -> list[Site]:
        """Sites where `apply` could add the optimization (default: none)."""
        return []

    def apply(self, src: CudaSource, site: Site, bench: Sequence[LaunchValues] = ()) -> CudaSource:
        """The optimization at a forward site; Refused when a precondition fails. With the
        workload's bench sizes (`bench`, as in `shape_preconditions`) its shape preconditions are
        checked too, and an operator may size what it writes for them (`_apply_at`)."""
        if not self.mechanical_apply:
            raise Refused(f"{self.name}: no mechanical forward step; an LLM provider must write it")
        self._check(self.preconditions(src, site))
        if not bench:
            return self._apply(src, site)
        self._check(self.shape_preconditions(src, site, bench))
        return self._apply_at(src, site, bench)

    def _apply(self, src: CudaSource, site: Site) -> CudaSource:
        raise Refused(f"{self.name}: no mechanical forward step")

    def _apply_at(self, src: CudaSource, site: Site, bench: Sequence[LaunchValues]) -> CudaSource:
        """The forward step sized for the bench sizes (default: the same as without them)."""
        return self._apply(src, site)

    def preconditions(self, src: CudaSource, site: Site) -> list[Precondition]:
        """Static facts that make the optimization valid at a site (recorded in skills)."""
        return []

    def shape_preconditions(
        self, src: CudaSource, site: Site, bench: Sequence[LaunchValues]
    ) -> list[Precondition]:
        """Facts about the problem's sizes, checked where a materializer knows them: `bench` holds,
        per bench shape, the launcher's argument values in order (None for a tensor). A step that
        is correct at every size may still only cost time at the sizes that matter."""
        return []

    def shape_effect(
        self, before: CudaSource, after: CudaSource, bench: Sequence[LaunchValues]
    ) -> str | None:
        """Why `after` suits the bench sizes better than `before`, when the step's effect shows in
        the sizes rather than in its site count (a changed value); None: no such effect (default)."""
        return None

    # ---- helpers ----------------------------------------------------------------------------
    def _check(self, facts: list[Precondition]) -> None:
        failed = [f for f in facts if not f.holds]
        if failed:
            raise Refused(f"{self.name}: " + "; ".join(f"{f.name}: {f.reason}" for f in failed))

    def site(self, src: CudaSource, node: Any, summary: str, **detail: str) -> Site:
        """A Site for a tree node or construct record of `src`."""
        start, end = (
            (node.start_byte, node.end_byte) if hasattr(node, "start_byte") else (node.start, node.end)
        )
        anchor = src.anchor(node)
        return Site(self.name, anchor, start, end, summary, tuple(sorted(detail.items())))

    @property
    def rank(self) -> int:
        """Position in the soft removal order (lower is removed earlier)."""
        return CATEGORIES.index(self.category)

    def describe(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "category": self.category,
            "intent": self.intent,
            "apply": self.mechanical_apply,
        }
