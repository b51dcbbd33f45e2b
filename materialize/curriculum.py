"""The order in which applicable skills are tried.

Curriculum order follows the lineages from the naive end: a skill applied close to the naive
kernel comes before one the expert added last, and a skill whose `scope.prior_skills` names
another applicable skill's operator waits for it. Where a skill sits is its position from the
naive end as a fraction of its lineage's length (`lineage_depth` over the number of steps), the
median over the lineages it was mined from: lineages run from 5 to 40 steps, so raw depths do not
compare, and one lineage that happened to place a skill early must not put it first everywhere
(the smallest depth did: `pragma_unroll` sat in the last fifth of 12 of its 13 lineages).
Ties go to the larger expected effect (measured time ratio, else resource deltas, else 0), then
the skill id, so the order is deterministic. `random` is the seeded baseline.

One rule on structure rather than position: when a tensor-core skill (category
`matrix_instruction`) matches the kernel, the skills that tile loops for scalar FMAs (category
`tiling`) wait for it. The tensor-core skill matches only a loop whose factors are 16-bit
elements summed in float (its forward precondition); both rewrite that loop whole, so whichever is
kept first shuts the other out, and on the CPU nothing times the two: the tiled FMA kernel runs at
a fraction of what the tensor cores give a 16-bit GEMM. Both lineages put their step at the naive
end, so position alone cannot order them.
"""

from __future__ import annotations

import math
import random
import statistics
from collections.abc import Sequence

from klineage.materialize.matching import Match
from klineage.skills import Skill

UNKNOWN_POSITION = 2.0  # after every known position (those lie in (0, 1])
#: categories of skills that wait for a matching tensor-core skill, and that skill's category
WAITS_FOR_TENSOR_CORES = frozenset({"tiling"})
TENSOR_CORES = "matrix_instruction"
ORDERS = ("curriculum", "random")


def naive_end_position(skill: Skill) -> float:
    """Median over the skill's lineages of its depth from the naive end over the lineage's length
    (`lineage_depth + backward_step - 1` steps); unknown: last."""
    positions = []
    for p in skill.provenance:
        depth, back = p.get("lineage_depth"), p.get("backward_step")
        if isinstance(depth, int) and isinstance(back, int) and depth >= 1 and back >= 1:
            positions.append(depth / (depth + back - 1))
    return statistics.median(positions) if positions else UNKNOWN_POSITION


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
    return (naive_end_position(m.skill), -expected_effect(m.skill), m.skill.skill_id)


def order_curriculum(matches: Sequence[Match], applied_operators: Sequence[str] = ()) -> list[Match]:
    """Depth then effect, with prerequisites first; operators already applied count as met.

    Two skills that each list the other's operator (lineages disagree) constrain nothing."""
    ops = {m.skill.operator for m in matches}
    done = set(applied_operators)
    tensor = {m.skill.operator for m in matches if _category(m) == TENSOR_CORES}

    def needs(m: Match) -> set[str]:
        prior = set(m.skill.scope.get("prior_skills") or []) & ops - done - {m.skill.operator}
        if _category(m) in WAITS_FOR_TENSOR_CORES:
            prior |= tensor - done
        return {
            p
            for p in prior
            if not any(
                o.skill.operator == p and m.skill.operator in (o.skill.scope.get("prior_skills") or [])
                for o in matches
            )
        }

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


def _category(m: Match) -> str | None:
    return m.operator.category if m.operator is not None else None


def order_random(matches: Sequence[Match], rng: random.Random) -> list[Match]:
    """Seeded shuffle (the baseline); sorted first so the outcome depends only on the seed."""
    out = sorted(matches, key=lambda m: m.skill.skill_id)
    rng.shuffle(out)
    return out


def rank(
    matches: Sequence[Match], order: str, rng: random.Random, applied_operators: Sequence[str] = ()
) -> list[Match]:
    if order == "curriculum":
        return order_curriculum(matches, applied_operators)
    if order == "random":
        return order_random(matches, rng)
    raise ValueError(f"unknown order '{order}' (known: {', '.join(ORDERS)})")
