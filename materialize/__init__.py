"""Materializer: apply a skill curriculum to a new kernel under the gate (DESIGN.md, 'Materializer').

`materialize(workload, start_source, skills, provider, budget, options)` runs the loop;
`make_provider("offline" | "anthropic", ...)` builds a provider; `match_skills` and `rank` are the
matching and curriculum steps on their own.
"""

from klineage.materialize.curriculum import (
    ORDERS,
    expected_effect,
    naive_end_position,
    order_curriculum,
    rank,
)
from klineage.materialize.loop import (
    DEFAULT_BUDGET,
    SKILLS_MODES,
    MaterializeOptions,
    MaterializeResult,
    StepRecord,
    materialize,
)
from klineage.materialize.matching import Match, MatchReport, Target, match_skills
from klineage.materialize.providers import (
    Move,
    Proposal,
    ProposalRequest,
    Provider,
    make_provider,
    provider_names,
)

__all__ = [
    "DEFAULT_BUDGET",
    "ORDERS",
    "SKILLS_MODES",
    "Match",
    "MatchReport",
    "MaterializeOptions",
    "MaterializeResult",
    "Move",
    "Proposal",
    "ProposalRequest",
    "Provider",
    "StepRecord",
    "Target",
    "expected_effect",
    "naive_end_position",
    "make_provider",
    "match_skills",
    "materialize",
    "order_curriculum",
    "provider_names",
    "rank",
]
