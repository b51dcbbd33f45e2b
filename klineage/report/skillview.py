"""Each skill as the report shows it: the nine card fields, its evidence linked to the steps of
the lineages, where it was admitted, and its effect across workloads as a small plot."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from klineage.cards import precondition_kind, to_markdown
from klineage.errors import KLineageError
from klineage.report import anchors
from klineage.report.diff import DiffLine, carrier_lines
from klineage.report.plots import Bar, bar_plot
from klineage.skills import Skill


@dataclass
class EffectRow:
    workload: str
    href: str | None
    device: str
    time_ratio: float | None
    time_ms: dict[str, float]
    resources: str


@dataclass
class LinkRef:
    text: str
    href: str | None
    note: str = ""


@dataclass
class SkillView:
    skill: Skill
    anchor: str
    category: str
    carrier: list[DiffLine]
    preconditions: list[dict[str, Any]]
    effects: list[EffectRow]
    plot: str
    evidence_steps: list[LinkRef]
    risks: list[dict[str, Any]]
    scope_workloads: list[LinkRef]
    materialized: list[LinkRef] = field(default_factory=list)
    card_markdown: str = ""

    @property
    def search_text(self) -> str:
        s = self.skill
        return " ".join(
            [s.skill_id, s.operator, self.category, s.intent, *s.scope.get("workloads", [])]
        ).lower()


def _category(operator: str, origin: str) -> str:
    from klineage.deopt.registry import get_operator

    try:
        return get_operator(operator).category
    except (KLineageError, KeyError):
        return origin


def _resources(res: Any) -> str:
    if not isinstance(res, dict):
        return str(res)
    return ", ".join(f"{k} {v:+d}" for k, v in res.items() if isinstance(v, int) and v) or "no change"


def _effects(skill: Skill, workload_anchor: dict[str, str]) -> list[EffectRow]:
    rows = []
    for wl, e in sorted(skill.effects.get("per_workload", {}).items()):
        ratio = e.get("time_ratio")
        rows.append(
            EffectRow(
                wl,
                workload_anchor.get(wl),
                str(e.get("device", "")),
                float(ratio) if isinstance(ratio, int | float) else None,
                e.get("time_ms") or {},
                _resources(e.get("resources")),
            )
        )
    return rows


def effect_plot(skill: Skill, rows: list[EffectRow]) -> str:
    """Speedup per workload where timed (1.0 = no change); otherwise the register delta, so a CPU
    store still shows what the skill does to the kernel."""
    if any(r.time_ratio is not None for r in rows) or not rows:
        bars = [
            Bar(r.workload, r.time_ratio, "" if r.time_ratio is not None else f"unmeasured ({r.device})")
            for r in rows
        ]
        return bar_plot(bars, f"effect of {skill.skill_id}", "speedup, time without / with", reference=1.0)
    per = skill.effects.get("per_workload", {})
    bars = []
    for r in rows:
        res = per.get(r.workload, {}).get("resources")
        regs = res.get("registers") if isinstance(res, dict) else None
        bars.append(
            Bar(
                r.workload,
                float(regs) if isinstance(regs, int) else None,
                "" if isinstance(regs, int) else "unmeasured",
            )
        )
    devices = ", ".join(sorted({r.device for r in rows})) or "n/a"
    return bar_plot(
        bars, f"effect of {skill.skill_id}", f"register delta, with − without (no timing on {devices})"
    )


def skill_view(
    skill: Skill, step_workload: dict[str, str], workload_anchor: dict[str, str], materialized: list[LinkRef]
) -> SkillView:
    """`step_workload` maps the step ids shown in the report to their workload, so evidence links
    only to steps that exist on the page."""
    effects = _effects(skill, workload_anchor)
    steps = [
        LinkRef(sid, f"#{anchors.step(sid)}" if sid in step_workload else None, step_workload.get(sid, ""))
        for sid in skill.evidence.get("steps", [])
    ]
    risks = [
        r | {"href": f"#{anchors.step(r['step_id'])}" if r.get("step_id") in step_workload else None}
        for r in skill.risks
        if isinstance(r, dict)
    ]
    pre = [p | {"kind_label": precondition_kind(p)} for p in skill.preconditions if isinstance(p, dict)]
    scope = [LinkRef(w, workload_anchor.get(w)) for w in skill.scope.get("workloads", [])]
    return SkillView(
        skill,
        anchors.skill(skill.skill_id),
        _category(skill.operator, skill.origin),
        carrier_lines(skill.carrier),
        pre,
        effects,
        effect_plot(skill, effects),
        steps,
        risks,
        scope,
        materialized,
        to_markdown(skill),
    )
