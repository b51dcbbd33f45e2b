"""Shared fixtures of the materializer tests (no tests here): skills shaped like the ones mining
tests/data/mining/scale yields, built directly so no test pays for a mining run."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from klineage.skills import Skill, upsert
from klineage.store.db import Store
from tests.conftest import REPO

SCALE = REPO / "tests/data/mining/scale"

# (operator, lineage depth from the naive end, prior skills, precondition)
LINEAGE_STEPS = 100
_MINED = [
    ("restrict", 1, [], "no_alias_at_launch"),
    ("pragma_unroll", 2, ["restrict"], "compile_time_trip_count"),
    ("launch_bounds", 3, ["pragma_unroll", "restrict"], "fixed_block_size"),
]


def make_skill(
    operator: str,
    depth: int = 1,
    prior: list[str] | None = None,
    *,
    workload: str = "scale_test",
    dtypes: list[str] | None = None,
    platforms: list[str] | None = None,
    time_ratio: Any = "unmeasured",
    resources: dict[str, int] | None = None,
    pre: list[dict[str, Any]] | None = None,
    skill_id: str | None = None,
) -> Skill:
    return Skill(
        skill_id=skill_id or f"{operator}-{workload}",
        operator=operator,
        intent=f"apply {operator}",
        carrier="--- before.cu\n+++ after.cu\n-a\n+b",
        preconditions=pre
        if pre is not None
        else [{"name": "fact", "holds": True, "reason": "it holds", "kind": ""}],
        effects={
            "per_workload": {
                workload: {"time_ratio": time_ratio, "resources": resources or {}, "device": "x"}
            }
        },
        scope={
            "workloads": [workload],
            "dtypes": dtypes or ["float32"],
            "platforms": platforms or ["cpu-emulator"],
            "prior_skills": prior or [],
            "categories": ["tuning"],
        },
        # a lineage of LINEAGE_STEPS steps: the skill sits at depth / LINEAGE_STEPS from its naive end
        provenance=[
            {
                "workload": workload,
                "lineage_depth": depth,
                "backward_step": LINEAGE_STEPS - depth + 1,
                "step_id": "s",
            }
        ],
    )


def scale_skills() -> list[Skill]:
    return [
        make_skill(op, depth, prior, pre=[{"name": name, "holds": True, "reason": "held", "kind": ""}])
        for op, depth, prior, name in _MINED
    ]


def skill_store(path: Path, skills: list[Skill] | None = None) -> Path:
    with Store(path) as store:
        upsert(store, scale_skills() if skills is None else skills)
    return path
