"""What the store knows about the corpus: the overview counts and, per workload, the lineage
(states simplest → expert, the steps taken, the attempts rejected at each state)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from klineage import lineage
from klineage.admission import ADMISSIONS_NOTE
from klineage.errors import KLineageError
from klineage.gates.result import launched_resources
from klineage.report import anchors
from klineage.report.diff import DiffLine, diff_lines
from klineage.report.lineage_svg import Edge, Node, lineage_svg
from klineage.store import lineage as lineage_rows
from klineage.store import runs
from klineage.store.db import Store
from klineage.store.timings import imported_by_device


@dataclass
class AttemptView:
    """A step tried from a state and not taken: rejected by the gate, refused, or an accepted alternative."""

    step_id: str
    anchor: str
    operator: str
    site: str
    line: int | None
    verdict: str  # rejected | refused | alternative
    category: str
    message: str
    gate_key: str | None


@dataclass
class StepView:
    """A taken step, read forward: from the simpler state to the more optimized one."""

    step_id: str
    anchor: str
    operator: str
    skill_id: str
    skill_href: str | None
    effect: str
    site: str
    roundtrip_ok: bool | None
    roundtrip_message: str
    simpler: str
    optimized: str
    registers_delta: int | None = None  # optimized minus simpler, what the CPU store can still show

    @property
    def effect_label(self) -> str:
        if self.effect != "unmeasured" or self.registers_delta is None:
            return self.effect
        return f"untimed · {self.registers_delta:+d} registers"


@dataclass
class StateView:
    hash: str
    anchor: str
    depth: int
    kind: str  # root | expert | state
    label: str
    time_ms: float | None
    device: str
    registers: int | None
    source: str
    arrived_by: StepView | None = None
    diff_base: str = ""
    diff: list[DiffLine] = field(default_factory=list)
    attempts: list[AttemptView] = field(default_factory=list)


@dataclass
class WorkloadView:
    name: str
    anchor: str
    states: list[StateView] = field(default_factory=list)  # simplest → expert
    steps: list[StepView] = field(default_factory=list)  # simplest → expert
    svg: str = ""
    skipped: str = ""
    counts: dict[str, int] = field(default_factory=dict)
    skills: list[str] = field(default_factory=list)
    reference_ms: float | None = None

    @property
    def expert(self) -> StateView | None:
        return self.states[-1] if self.states else None

    @property
    def root(self) -> StateView | None:
        return self.states[0] if self.states else None

    @property
    def speedup(self) -> float | None:
        r, e = self.root, self.expert
        if r and e and r.time_ms and e.time_ms and r is not e:
            return r.time_ms / e.time_ms
        return None


@dataclass
class Overview:
    workloads: int
    states: int
    steps_taken: int
    accepted: int
    rejected: int
    refused: int
    skills_admitted: list[str]
    skills_pending: list[str]
    gate_runs: int
    by_category: list[dict[str, Any]]
    devices: list[dict[str, Any]]
    mining_runs: list[dict[str, Any]]
    counts: dict[str, int]
    admissions_note: str = ""  # where admissions live, shown when this store has none


def _registers(result: dict[str, Any] | None) -> int | None:
    res = launched_resources(result or {})  # the instantiations the launches used
    regs = [int(r.get("registers", 0)) for r in res.values() if isinstance(r, dict)]
    return sum(regs) if regs else None


def _attempt(row: dict[str, Any]) -> AttemptView:
    site = row["site"] or {}
    verdict = (
        "refused" if row["category"] == "refused" else ("alternative" if row["accepted"] else "rejected")
    )
    return AttemptView(
        row["step_id"],
        anchors.step(row["step_id"]),
        row["operator"],
        site.get("summary", ""),
        (site.get("anchor") or {}).get("line"),
        verdict,
        row["category"],
        row["message"] or "",
        row["gate_key"],
    )


def workload_view(store: Store, name: str, skill_ids: set[str]) -> WorkloadView:
    """One workload's lineage; a workload whose expert failed its own gate is shown as skipped."""
    view = WorkloadView(name, anchors.workload(name))
    try:
        g = lineage.taken_chain(lineage.build(store, name))  # a beam walk's alternatives: attempts below
    except KLineageError:
        expert = lineage_rows.expert_verdict(store, name)
        view.skipped = (
            f"the expert fails its own gate: {expert['category']}: {expert['message']}"
            if expert
            else "no lineage recorded"
        )
        return view
    sources = lineage_rows.kernel_sources(store, name)
    gates = lineage_rows.state_gates(store, name)
    order = sorted(g.nodes, key=lambda n: -g.nodes[n]["depth"])
    for h in order:
        d = g.nodes[h]
        kind = "expert" if d["expert"] else ("root" if h == g.graph["root"] else "state")
        label = (
            "expert"
            if d["expert"]
            else (f"simplest · depth {d['depth']}" if kind == "root" else f"depth {d['depth']}")
        )
        gate = gates.get(h) or {}
        view.states.append(
            StateView(
                h,
                anchors.state(name, h),
                d["depth"],
                kind,
                label,
                d.get("time_ms"),
                gate.get("device") or "",
                _registers(gate.get("result")),
                sources.get(h, ""),
            )
        )
        timing = (gate.get("result") or {}).get("timing") or {}
        if d["expert"] and timing.get("reference_median_ms"):
            view.reference_ms = timing["reference_median_ms"]
    by_hash = {s.hash: s for s in view.states}
    roundtrips = lineage_rows.taken_roundtrips(store, name)
    for u, v, e in sorted(g.edges(data=True), key=lambda x: -g.nodes[x[0]]["depth"]):
        known = e["skill"] in skill_ids
        step = StepView(
            e["step_id"],
            anchors.step(e["step_id"]),
            e["operator"],
            e["skill"],
            f"#{anchors.skill(e['skill'])}" if known else None,
            e["effect"],
            e["site"],
            e["roundtrip"],
            roundtrips.get(e["step_id"], {}).get("message", ""),
            u,
            v,
        )
        view.steps.append(step)
        target = by_hash[v]
        if target.registers is not None and by_hash[u].registers is not None:
            step.registers_delta = target.registers - by_hash[u].registers
        target.arrived_by = step
        target.diff_base = f"depth {by_hash[u].depth} ({u[:10]})"
        target.diff = diff_lines(
            by_hash[u].source, target.source, f"depth-{by_hash[u].depth}.cu", f"depth-{target.depth}.cu"
        )
        if known and e["skill"] not in view.skills:
            view.skills.append(e["skill"])
    naive = lineage_rows.naive_kernel(store, name)
    if naive and view.root is not None:
        view.root.diff_base = "naive.cu (what remains beyond the naive kernel)"
        view.root.diff = diff_lines(
            naive["source"], view.root.source, "naive.cu", f"depth-{view.root.depth}.cu"
        )
    for row in lineage_rows.untaken_attempts(store, name):
        if row["from_state"] in by_hash:
            by_hash[row["from_state"]].attempts.append(_attempt(row))
    attempts = [a for s in view.states for a in s.attempts]
    view.counts = {
        "states": len(view.states),
        "taken": len(view.steps),
        "alternatives": sum(a.verdict == "alternative" for a in attempts),
        "rejected": sum(a.verdict == "rejected" for a in attempts),
        "refused": sum(a.verdict == "refused" for a in attempts),
        "gate_runs": lineage_rows.count_gate_runs(store, name),
    }
    view.svg = lineage_svg(
        [
            Node(
                s.hash,
                s.label,
                [
                    s.hash[:12],
                    f"{s.time_ms:.4f} ms" if s.time_ms else f"untimed ({s.device or 'n/a'})",
                    f"{s.registers} registers" if s.registers is not None else "",
                ],
                f"#{s.anchor}",
                s.kind,
            )
            for s in view.states
        ],
        [Edge(s.simpler, s.optimized, s.skill_id, s.effect_label, s.skill_href) for s in view.steps],
        anchors.slug(name),
        f"lineage of {name}",
    )
    return view


def workload_names(store: Store) -> list[str]:
    return lineage_rows.recorded_workloads(store)


def overview(
    store: Store, workloads: list[WorkloadView], admitted: list[str], pending: list[str]
) -> Overview:
    steps = lineage_rows.step_counts(store)
    by_category = lineage_rows.gate_runs_by_category(store)
    devices: dict[tuple[str, str], dict[str, Any]] = {}
    for r in lineage_rows.gate_run_devices(store):
        key = (r["device"] or "unknown", r["backend"])
        d = devices.setdefault(key, {"device": key[0], "backend": key[1], "runs": 0, "timed": 0})
        d["runs"] += 1
        d["timed"] += int(bool((r["result"] or {}).get("timing")))
    for r in imported_by_device(store):  # measured on a GPU apart from the gate (klineage timings import)
        devices[(r["device"], "imported")] = {
            "device": r["device"],
            "backend": "timings import",
            "runs": r["kernels"],
            "timed": r["kernels"],
        }
    return Overview(
        workloads=len(workloads),
        states=lineage_rows.count_states(store),
        steps_taken=int(steps["taken"] or 0),
        accepted=int(steps["accepted"] or 0),
        rejected=int(steps["rejected"] or 0),
        refused=int(steps["refused"] or 0),
        skills_admitted=admitted,
        skills_pending=pending,
        gate_runs=lineage_rows.count_gate_runs(store),
        by_category=by_category,
        devices=sorted(devices.values(), key=lambda d: (-d["runs"], d["device"])),
        mining_runs=runs.mining_runs(store),
        counts=store.counts(),
        admissions_note=ADMISSIONS_NOTE.format(db=store.path),
    )
