"""Admission (DESIGN.md, 'Walker, lineage, skills'): a skill is admitted once it has been
materialized on a workload other than its source, passed the gate and shown its expected effect.

A materialization step that was *kept* passed the gate and was better (GPU: faster beyond the
timing spread; CPU: the skill's static effect present), so a kept step on a foreign workload
admits the skill. Every kept application is recorded under verification.materialized_on;
imported cards become `verified` on their first kept application.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from klineage.store.db import Store
from klineage.store.skills import get_skill, set_verification

#: Where admissions live, for a store that has none (skills list, report).
ADMISSIONS_NOTE = (
    "No skill admitted in {db}: a skill is admitted when `klineage heldout`, `klineage materialize` or "
    "`klineage skills verify` keeps it on a workload it was not mined from, recorded in the store that "
    "run used (its --db); run one of them with --db {db}."
)


def record_admissions(store: Store, result: Any) -> list[str]:
    """Update the skills a MaterializeResult kept; returns the ids newly admitted."""
    newly: list[str] = []
    for step in result.steps:
        if not step.kept or not step.skill_id:
            continue
        skill = get_skill(store, step.skill_id)
        if skill is None:
            continue
        entry = {
            "workload": result.workload,
            "run_id": result.run_id,
            "step": step.index,
            "gate_key": step.gate_key,
            "backend": result.backend,
            "effect": step.reason,
            "time_ms": step.time_ms,
        }
        done = skill.verification.get("materialized_on", [])
        if not any(m.get("run_id") == result.run_id and m.get("step") == step.index for m in done):
            done.append(entry)
        skill.verification["materialized_on"] = done
        if skill.origin == "imported":
            skill.verification["status"] = "verified"
        if result.workload not in skill.scope.get("workloads", []) and not skill.admitted:
            skill = replace(skill, admitted=True)
            skill.verification["admitted_by"] = entry
            newly.append(skill.skill_id)
        set_verification(store, skill)
    return newly
