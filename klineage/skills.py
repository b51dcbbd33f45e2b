"""Skill extraction: each accepted (taken) walker step, reversed, becomes a skill with the nine
fields of DESIGN.md plus provenance. Skills of the same operator whose holding preconditions
match are one skill: their evidence, risks, scope and effects accumulate across lineages.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import replace
from typing import Any

from klineage.deopt.registry import get_operator
from klineage.gates.result import launched_resources
from klineage.source.canon import CANON_STEP
from klineage.store import lineage as lineage_rows
from klineage.store.db import Store
from klineage.store.skill_record import Skill
from klineage.store.skills import get_skill, load_skills, put_skill
from klineage.timings import kernel_times
from klineage.workload import Workload

__all__ = ["Skill", "extract_skills", "load_skills", "merge", "resource_delta", "skill_id_for", "upsert"]

RESOURCE_FIELDS = ("registers", "shared_bytes", "spill_stores", "spill_loads", "stack_bytes", "barriers")


def roundtrip_failed(skill: Skill) -> bool:
    """Whether every roundtrip that was tried failed: the mined step could not be re-derived
    forward where it was found, so the skill is evidence, not a skill the materializer offers
    (unless asked: --include-unverified). A skill with no roundtrip tried is not judged here."""
    oks = [r.get("ok") for r in skill.verification.get("roundtrips", [])]
    return any(ok is False for ok in oks) and not any(ok is True for ok in oks)


def offered(
    skills: list[Skill], include_unverified: bool = False
) -> tuple[list[Skill], list[tuple[str, str]]]:
    """(the skills the materializer may apply, (skill_id, reason) for those it keeps back)."""
    keep: list[Skill] = []
    held: list[tuple[str, str]] = []
    for s in skills:
        if roundtrip_failed(s) and not include_unverified:
            n = len(s.verification.get("roundtrips", []))
            held.append(
                (
                    s.skill_id,
                    f"roundtrip failed in {n} of {n} lineages: evidence, not a skill "
                    "(--include-unverified to try it)",
                )
            )
        else:
            keep.append(s)
    return keep, held


def skill_id_for(operator: str, preconditions: list[dict[str, Any]]) -> str:
    holding = sorted(p["name"] for p in preconditions if p.get("holds"))
    return f"{operator.replace(':', '-')}-{hashlib.sha1(json.dumps(holding).encode()).hexdigest()[:6]}"


def resource_delta(optimized: dict[str, Any], simpler: dict[str, Any]) -> dict[str, int]:
    """Totals over the given kernels (the instantiations launched, `launched_resources`):
    optimized minus simplified (what the optimization costs or saves)."""

    def total(res: dict[str, Any], f: str) -> int:
        return sum(int(r.get(f, 0)) for r in res.values())

    return {f: total(optimized, f) - total(simpler, f) for f in RESOURCE_FIELDS}


def _union(a: list[Any], b: list[Any]) -> list[Any]:
    out = list(a)
    seen = {json.dumps(x, sort_keys=True, default=str) for x in a}
    for x in b:
        k = json.dumps(x, sort_keys=True, default=str)
        if k not in seen:
            seen.add(k)
            out.append(x)
    return out


def merge(old: Skill, new: Skill) -> Skill:
    """Keep every piece of evidence of both (same operator, same holding preconditions)."""
    return replace(
        old,
        carrier=old.carrier if old.carrier and len(old.carrier) <= len(new.carrier) else new.carrier,
        preconditions=_union(old.preconditions, new.preconditions),
        effects={
            "per_workload": {**old.effects.get("per_workload", {}), **new.effects.get("per_workload", {})}
        },
        evidence={
            k: _union(old.evidence.get(k, []), new.evidence.get(k, []))
            for k in set(old.evidence) | set(new.evidence)
        },
        risks=_union(old.risks, new.risks),
        scope={
            k: sorted(set(old.scope.get(k, [])) | set(new.scope.get(k, [])))
            for k in set(old.scope) | set(new.scope)
        },
        verification={
            **old.verification,
            **new.verification,
            "roundtrips": _union(
                old.verification.get("roundtrips", []), new.verification.get("roundtrips", [])
            ),
        },
        provenance=_union(old.provenance, new.provenance),
    )


def extract_skills(store: Store, wl: Workload) -> list[Skill]:
    """Skills from this workload's lineage (taken steps), not yet merged with the store."""
    # the canonical step (expert -> canonical form) is part of the lineage, never a skill
    steps = [s for s in lineage_rows.taken_steps(store, wl.name) if s["operator"] != CANON_STEP]
    if not steps:
        return []
    expert_hash = lineage_rows.expert_state(store, wl.name)
    gate_of_state = lineage_rows.state_gate_keys(store, wl.name)
    rejected = lineage_rows.rejected_steps(store, wl.name)
    depth_total = len(steps)
    timed = kernel_times(store, wl.name)
    skills = []
    for i, step in enumerate(steps):
        detail = (step["site"] or {}).get("detail", {})
        if step["operator"].startswith("llm:"):  # open vocabulary: what the model named
            op_name, intent, category = (
                step["operator"],
                detail.get("intent") or step["operator"],
                detail.get("category", "other"),
            )
        else:
            op = get_operator(step["operator"])
            op_name, intent, category = op.name, op.intent, op.category
        pre = step["preconditions"] or []
        optimized = lineage_rows.gate_result(store, gate_of_state.get(step["from_state"]))
        simpler = lineage_rows.gate_result(store, step["gate_key"])
        device = (optimized or {}).get("device", "unknown")
        effect: dict[str, Any] = {"resources": "unmeasured", "time_ratio": "unmeasured", "device": device}
        if optimized and simpler and optimized.get("resources") and simpler.get("resources"):
            # only the instantiations the launches used: a size dispatch compiles many, runs one
            used = launched_resources(optimized)
            effect["resources"] = resource_delta(used, launched_resources(simpler))
            if len(used) < len(optimized["resources"]):
                effect["instantiations"] = sorted(used)
        t_opt = (optimized or {}).get("timing") or {}
        t_simple = (simpler or {}).get("timing") or {}
        if t_opt.get("median_ms") and t_simple.get("median_ms"):
            effect["time_ratio"] = t_simple["median_ms"] / t_opt["median_ms"]  # speedup the optimization buys
            effect["time_ms"] = {"without": t_simple["median_ms"], "with": t_opt["median_ms"]}
        elif (
            step["from_state"] in timed and step["to_state"] in timed
        ):  # gated on the CPU, timed on a GPU apart
            with_, without = timed[step["from_state"]], timed[step["to_state"]]
            effect["time_ratio"] = without.median_ms / with_.median_ms
            effect["time_ms"] = {"without": without.median_ms, "with": with_.median_ms}
            effect["device"] = with_.device
            effect["timed_by"] = "state timings (klineage timings import)"
        risks = [
            {
                "category": r["category"],
                "message": r["message"],
                "step_id": r["step_id"],
                "workload": wl.name,
                "site": (r["site"] or {}).get("summary", ""),
            }
            for r in rejected
            if r["operator"] == op_name
        ]
        prior = sorted({s["operator"] for s in steps[i + 1 :]})
        roundtrip = step["roundtrip"] or {}
        skill = Skill(
            skill_id=skill_id_for(op_name, pre),
            operator=op_name,
            intent=intent,
            anchor=(step["site"] or {}).get("anchor", {}),
            carrier=step["carrier"] or "",
            preconditions=pre,
            effects={"per_workload": {wl.name: effect}},
            evidence={
                "steps": [step["step_id"]],
                "gate_runs": [
                    k
                    for k in (
                        gate_of_state.get(step["from_state"]),
                        step["gate_key"],
                        roundtrip.get("gate_key"),
                    )
                    if k
                ],
                "transitions": [f"{step['to_state']}->{step['from_state']}"],
            },
            risks=risks,
            scope={
                "workloads": [wl.name],
                "dtypes": wl.dtypes,
                "platforms": [device],
                "prior_skills": prior,
                "categories": [category],
            },
            verification={
                "roundtrips": [
                    {"workload": wl.name, "ok": roundtrip.get("ok"), "message": roundtrip.get("message", "")}
                ],
                "gate_trials": len([k for k in (step["gate_key"], roundtrip.get("gate_key")) if k]),
                "materialized_on": [],
            },
            provenance=[
                {
                    "workload": wl.name,
                    "source_kernel_hash": expert_hash,
                    "lineage_depth": depth_total - i,
                    "backward_step": i + 1,
                    "step_id": step["step_id"],
                }
            ],
        )
        skills.append(skill)
    return skills


def upsert(store: Store, skills: list[Skill]) -> list[str]:
    """Merge skills into the store in one transaction; returns the ids touched."""
    ids = []
    with store.transaction() as con:
        for s in skills:
            existing = get_skill(store, s.skill_id)
            if existing is not None:
                s = merge(existing, s)
            put_skill(con, s)
            ids.append(s.skill_id)
    return ids
