"""Materialization runs, their steps, the held-out table and the budget curves.

A run belongs to an arm — curriculum, random, or no skills — read from its skills and order
modes. The curve of a run is the best value so far against the budget spent (gated candidates;
proposals that were never gated, such as duplicates, spend none): the speedup over the start
kernel where candidates were timed (the start time is the summary's `start_time_ms`, else its
`speedup` times the best kept time, else the first timed step), else the number of kept steps
(CPU). A run is held out when its summary says so or its workload contributed no skill.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from klineage.report import anchors
from klineage.report.plots import Series, line_plot
from klineage.store import runs as run_rows
from klineage.store.db import Store
from klineage.store.llm import usage_by_model

NO_SKILLS = ("none", "no_skills", "no-skills", "off", "without", "baseline")
START_KEYS = ("start_time_ms", "start_ms", "baseline_ms")


@dataclass
class MatStep:
    index: int
    skill_id: str | None
    skill_href: str | None
    operator: str
    verdict: str  # the materializer's: kept | rejected | not_faster | no_effect | no_candidate | duplicate
    gated: bool
    category: str
    message: str
    time_ms: float | None
    cost_usd: float | None


@dataclass
class MatRun:
    run_id: str
    anchor: str
    workload: str
    provider: str
    model: str
    arm: str
    skills_mode: str
    order_mode: str
    budget: int | None
    started_at: Any
    summary: dict[str, Any]
    heldout: bool
    status: str = ""
    backend: str = ""
    steps: list[MatStep] = field(default_factory=list)

    @property
    def start_ms(self) -> float | None:
        for k in START_KEYS:
            v = self.summary.get(k)
            if isinstance(v, int | float) and v > 0:
                return float(v)
        speedup, best = self.summary.get("speedup"), self._best_kept
        if isinstance(speedup, int | float) and speedup > 0 and best:
            return float(speedup) * best
        return next((s.time_ms for s in self.steps if s.time_ms), None)

    @property
    def _best_kept(self) -> float | None:
        times = [s.time_ms for s in self.steps if s.verdict == "kept" and s.time_ms]
        return min(times) if times else None

    @property
    def best_ms(self) -> float | None:
        return self._best_kept

    @property
    def speedup(self) -> float | None:
        start, best = self.start_ms, self.best_ms
        return start / best if start and best else None

    @property
    def kept(self) -> int:
        return sum(s.verdict == "kept" for s in self.steps)

    @property
    def gated(self) -> int:
        return sum(s.gated for s in self.steps)

    @property
    def stop_reason(self) -> str:
        return str(self.summary.get("stop_reason") or "")

    @property
    def cost(self) -> float:
        return sum(s.cost_usd or 0.0 for s in self.steps)

    def curve(self, timed: bool, by_cost: bool = False) -> list[tuple[float, float]]:
        """(budget spent, best so far) after each step that spent budget, from (0, baseline)."""
        start = self.start_ms
        points = [(0.0, 1.0 if timed else 0.0)]
        best, kept, gated, spent = start, 0, 0, 0.0
        for s in self.steps:
            spent += s.cost_usd or 0.0
            gated += int(s.gated)
            if s.verdict == "kept":
                kept += 1
                if s.time_ms and (best is None or s.time_ms < best):
                    best = s.time_ms
            if not (s.gated or (by_cost and s.cost_usd)):
                continue
            y = (start / best if start and best else 1.0) if timed else float(kept)
            points.append((spent if by_cost else float(gated), y))
        return points


@dataclass
class Plot:
    workload: str
    svg: str


@dataclass
class MatView:
    runs: list[MatRun]
    plots: list[Plot]
    cost_plots: list[Plot]
    arms: list[str]
    heldout: list[dict[str, Any]]
    llm: list[dict[str, Any]]

    @property
    def empty(self) -> bool:
        return not self.runs


def arm_of(skills_mode: str, order_mode: str) -> str:
    sm, om = skills_mode.lower(), order_mode.lower()
    if sm in NO_SKILLS or om in NO_SKILLS:
        return "no skills"
    for name in ("curriculum", "random"):
        if name in om or name in sm:
            return name
    return om or sm or "default"


def _verdict(row: dict[str, Any]) -> str:
    """The recorded verdict; rows from before the verdict column get one from accepted/kept."""
    if row.get("verdict"):
        return str(row["verdict"])
    if row["kept"]:
        return "kept"
    if row["accepted"] is None:
        return "no_candidate"
    return "not_faster" if row["accepted"] else "rejected"


def _gated(row: dict[str, Any]) -> bool:
    detail = row.get("detail") if isinstance(row.get("detail"), dict) else {}
    return bool(detail.get("gated")) or bool(row.get("gate_key")) or row["accepted"] is not None


def _plots(runs: list[MatRun], by_cost: bool) -> list[Plot]:
    plots = []
    for wl in sorted({r.workload for r in runs}):
        mine = [r for r in runs if r.workload == wl]
        if by_cost and not any(r.cost for r in mine):
            continue
        timed = all(r.start_ms for r in mine)
        series = [Series(f"{r.arm} · {r.run_id}", r.curve(timed, by_cost), r.arm) for r in mine]
        ylabel = "speedup over start" if timed else "accepted steps kept"
        xlabel = "dollars spent" if by_cost else "gated candidates spent"
        plots.append(Plot(wl, line_plot(series, f"{wl}: {ylabel} vs {xlabel}", xlabel, ylabel)))
    return plots


def _memorization(summary: dict[str, Any]) -> tuple[float | None, bool | None]:
    """(closest AST similarity to an expert, flagged as a copy) where a run's summary carries the
    memorization check (`memorization` as `klineage heldout` computes it, or flat keys); else None."""
    mem = summary.get("memorization") if isinstance(summary.get("memorization"), dict) else {}
    closest = mem.get("closest") if isinstance(mem.get("closest"), dict) else {}
    sim = closest.get("ast", summary.get("max_similarity"))
    flag = mem.get("is_copy", summary.get("is_copy", summary.get("copy")))
    return (float(sim) if isinstance(sim, int | float) else None), (bool(flag) if flag is not None else None)


def _heldout_rows(runs: list[MatRun], arms: list[str]) -> list[dict[str, Any]]:
    rows = []
    for wl in sorted({r.workload for r in runs if r.heldout}):
        row: dict[str, Any] = {"workload": wl, "cells": {}, "similarity": None, "flagged": None}
        for arm in arms:
            mine = [r for r in runs if r.workload == wl and r.heldout and r.arm == arm]
            if not mine:
                continue
            best = max(mine, key=lambda r: (r.speedup or 0.0, r.kept))
            row["cells"][arm] = {
                "improved": best.kept > 0,
                "status": best.status,
                "speedup": best.speedup,
                "kept": best.kept,
                "href": f"#{best.anchor}",
            }
        checks = [_memorization(r.summary) for r in runs if r.workload == wl]
        sims = [s for s, _ in checks if s is not None]
        flags = [f for _, f in checks if f is not None]
        row["similarity"] = max(sims) if sims else None
        row["flagged"] = any(flags) if flags else None
        rows.append(row)
    return rows


def materialization_view(store: Store, skill_ids: set[str], mined_workloads: set[str]) -> MatView:
    runs = []
    for r in run_rows.materialization_runs(store):
        summary = r["summary"] if isinstance(r["summary"], dict) else {}
        sm, om = r["skills_mode"] or "", r["order_mode"] or ""
        run = MatRun(
            r["run_id"],
            anchors.run(r["run_id"]),
            r["workload"],
            r["provider"],
            r["model"] or "",
            arm_of(sm, om),
            sm,
            om,
            r["budget"],
            r["started_at"],
            summary,
            bool(summary.get("heldout")) or r["workload"] not in mined_workloads,
            r.get("status") or "",
            r.get("backend") or "",
        )
        for s in run_rows.materialization_steps(store, r["run_id"]):
            sid = s["skill_id"]
            run.steps.append(
                MatStep(
                    s["step_index"],
                    sid,
                    f"#{anchors.skill(sid)}" if sid in skill_ids else None,
                    s["operator"] or "",
                    _verdict(s),
                    _gated(s),
                    s["category"] or "",
                    s["message"] or "",
                    s["time_ms"],
                    s["cost_usd"],
                )
            )
        runs.append(run)
    arms = sorted(
        {r.arm for r in runs},
        key=lambda a: (
            ("curriculum", "random", "no skills").index(a)
            if a in ("curriculum", "random", "no skills")
            else 3,
            a,
        ),
    )
    llm = usage_by_model(store)
    return MatView(runs, _plots(runs, False), _plots(runs, True), arms, _heldout_rows(runs, arms), llm)


def materialized_on(view: MatView) -> dict[str, list[tuple[str, str, str]]]:
    """skill id -> (run anchor, workload, verdict) for every materialization step that tried it."""
    out: dict[str, list[tuple[str, str, str]]] = {}
    for r in view.runs:
        for s in r.steps:
            if s.skill_id:
                out.setdefault(s.skill_id, []).append(
                    (f"#{r.anchor}", f"{r.workload} · {r.arm} · step {s.index}", s.verdict)
                )
    return out
