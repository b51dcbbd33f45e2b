"""The order in which applicable skills are tried.

Curriculum order follows the lineages from the naive end: a skill first applied close to the
naive kernel (small `lineage_depth` in its provenance) comes before one the expert added last,
and a skill whose `scope.prior_skills` names another applicable skill's operator waits for it.
Ties go to the larger expected effect (measured time ratio, else resource deltas, else 0), then
the skill id, so the order is deterministic. `random` is the seeded baseline.
"""

from __future__ import annotations

import math
import random
from collections.abc import Sequence

from klineage.materialize.matching import Match
from klineage.skills import Skill

UNKNOWN_DEPTH = 1_000.0
ORDERS = ("curriculum", "random")


def lineage_depth(skill: Skill) -> float:
    """Smallest depth from the naive end over the skill's lineages (unknown: last)."""
    depths = [float(p["lineage_depth"]) for p in skill.provenance if isinstance(p.get("lineage_depth"), int | float)]
    return min(depths) if depths else UNKNOWN_DEPTH


def _numeric(x: object) -> float | None:
    return float(x) if isinstance(x, int | float) and not isinstance(x, bool) else None


def expected_effect(skill: Skill) -> float:
    """Log of the geometric-mean measured speedup; else a small score from resource savings; else 0.

    Resource deltas are optimized minus simpler: fewer spills and registers score above more."""
    per = skill.effects.get("per_workload", {}) or {}
    ratios = [r for e in per.values() if (r := _numeric(e.get("time_ratio"))) and r > 0]
    if ratios:
        return sum(math.log(r) for r in ratios) / len(ratios)
    scores = []
    for e in per.values():
        res = e.get("resources")
        if isinstance(res, dict):
            spills = (_numeric(res.get("spill_stores")) or 0) + (_numeric(res.get("spill_loads")) or 0)
            regs = _numeric(res.get("registers")) or 0
            scores.append(-1e-3 * spills - 1e-5 * regs)
    return sum(scores) / len(scores) if scores else 0.0


def _key(m: Match) -> tuple[float, float, str]:
    return (lineage_depth(m.skill), -expected_effect(m.skill), m.skill.skill_id)


def order_curriculum(matches: Sequence[Match], applied_operators: Sequence[str] = ()) -> list[Match]:
    """Depth then effect, with prerequisites first; operators already applied count as met.

    Two skills that each list the other's operator (lineages disagree) constrain nothing."""
    ops = {m.skill.operator for m in matches}
    done = set(applied_operators)

    def needs(m: Match) -> set[str]:
        prior = set(m.skill.scope.get("prior_skills") or []) & ops - done - {m.skill.operator}
        return {p for p in prior
                if not any(o.skill.operator == p and m.skill.operator in (o.skill.scope.get("prior_skills") or [])
                           for o in matches)}

    waiting = sorted(matches, key=_key)
    placed: list[Match] = []
    placed_ops: set[str] = set()
    while waiting:
        ready = [m for m in waiting if needs(m) <= placed_ops]
        nxt = ready[0] if ready else waiting[0]  # a cycle left: fall back to the key order
        placed.append(nxt)
        placed_ops.add(nxt.skill.operator)
        waiting.remove(nxt)
    return placed


def order_random(matches: Sequence[Match], rng: random.Random) -> list[Match]:
    """Seeded shuffle (the baseline); sorted first so the outcome depends only on the seed."""
    out = sorted(matches, key=lambda m: m.skill.skill_id)
    rng.shuffle(out)
    return out


def rank(matches: Sequence[Match], order: str, rng: random.Random, applied_operators: Sequence[str] = ()) -> list[Match]:
    if order == "curriculum":
        return order_curriculum(matches, applied_operators)
    if order == "random":
        return order_random(matches, rng)
    raise ValueError(f"unknown order '{order}' (known: {', '.join(ORDERS)})")
