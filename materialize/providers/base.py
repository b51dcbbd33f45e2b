"""What the loop asks a provider for: one candidate kernel for one move, with its cost.

A *move* is what to try next: a skill (with its operator and forward sites), a bare operator
(`--skills none`, offline), or a free attempt guided only by gate feedback (`--skills none`, LLM).
Providers register by name (`register_provider`), each a small class.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, ClassVar

from klineage.deopt.base import Operator, Site
from klineage.errors import KLineageError
from klineage.llm.base import Exchange, Ledger
from klineage.skills import Skill
from klineage.workload import Workload


@dataclass(frozen=True)
class Move:
    """One thing to try. `key` is the skill id, `op:<operator>` or `free`."""

    key: str
    skill: Skill | None = None
    operator: Operator | None = None
    sites: tuple[Site, ...] = ()

    @property
    def label(self) -> str:
        """Short name for file names and the progress display."""
        if self.skill is not None:
            return self.skill.skill_id
        return self.operator.name if self.operator is not None else "free"


@dataclass
class ProposalRequest:
    workload: Workload
    source: str
    move: Move
    feedback: str = ""
    step_index: int = 0
    backend: str = "emu"
    skills: list[Skill] = field(default_factory=list)  # the run's whole skill set (LLM prompts cache it)


@dataclass
class Proposal:
    """A candidate (`source`), or None with `note` saying why there is none."""

    source: str | None
    note: str = ""
    cost_usd: float = 0.0
    exchange_ids: list[str] = field(default_factory=list)
    usage: dict[str, int] = field(default_factory=dict)


class Provider(ABC):
    """Makes candidates. `mechanical`: only operators' `apply` (matching then needs one)."""

    name: ClassVar[str]
    mechanical: ClassVar[bool] = False
    #: candidates a provider may make for one move on one kernel (an LLM may try again with feedback)
    attempts_per_move: ClassVar[int] = 1
    model: str | None = None

    @abstractmethod
    def propose(self, request: ProposalRequest) -> Proposal:
        """One candidate for `request.move` applied to `request.source`."""

    @property
    def ledger(self) -> Ledger | None:
        """Cost accounting, for providers that spend money."""
        return None

    def set_recorder(self, recorder: Callable[[Exchange], None] | None) -> None:
        """Where to store exchanges (the loop points it at the run's DuckDB rows)."""
        return None

    def describe(self) -> dict[str, Any]:
        return {"provider": self.name, "model": self.model}


#: candidate providers by name (`make_provider`): what proposes a kernel for a move. The LLM one
#: asks a model backend of klineage.llm (`get_llm`), a registry of its own.
_CANDIDATE_PROVIDERS: dict[str, type[Provider]] = {}


def register_provider(cls: type[Provider]) -> type[Provider]:
    _CANDIDATE_PROVIDERS[cls.name] = cls
    return cls


def provider_names() -> list[str]:
    _load_builtin()
    return sorted(_CANDIDATE_PROVIDERS)


def make_provider(name: str, **kwargs: Any) -> Provider:
    """A provider by name; unknown names are bad input (exit 2)."""
    _load_builtin()
    if name not in _CANDIDATE_PROVIDERS:
        raise KLineageError(f"unknown provider '{name}' (known: {', '.join(sorted(_CANDIDATE_PROVIDERS))})")
    return _CANDIDATE_PROVIDERS[name](**kwargs)


def _load_builtin() -> None:
    import klineage.materialize.providers.anthropic  # noqa: F401
    import klineage.materialize.providers.offline  # noqa: F401
