"""`klineage heldout`: run the materializer on every held-out instance (heldout/NAME/) with the
shipped skills, gate the produced kernels, and check them for copies of the expert sources.

The bar (exit 1 when it fails; DESIGN.md "Held-out check", issue 9):
- every produced kernel (the best kernel of each run: a kept candidate, or the naive start when
  nothing was kept) passes the gate: pass rate 100%;
- no produced kernel is flagged as a copy of an expert source (klineage.memorization), and no
  skill's carrier holds more than the stated fraction of its source kernel;
- with the skills (``--skills all``, not a baseline run): at least 70% of the instances improved
  by at least one skill, and on the GPU (``--backend cuda``) a geometric-mean speedup over the
  naive kernels of at least 2x.
Baseline runs (``--skills none``, ``--order random``) are held to the first two only: they are
the comparison, not the claim.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from klineage.errors import KLineageError
from klineage.memorization import (
    CARRIER_MAX_FRACTION,
    CarrierCheck,
    check_carriers,
    check_kernel,
    expert_sources,
)
from klineage.paths import repo_root
from klineage.skills import Skill
from klineage.workload import load_workload

PASS_BAR = 1.0
IMPROVED_BAR = 0.70
SPEEDUP_BAR = 2.0


def heldout_dir() -> Path:
    return repo_root() / "heldout"


def instance_names(root: Path | None = None) -> list[str]:
    """Every held-out instance folder (one with workload.py and naive.cu), sorted."""
    root = root or heldout_dir()
    return sorted(
        p.name for p in root.iterdir() if (p / "workload.py").is_file() and (p / "naive.cu").is_file()
    )


@dataclass
class InstanceResult:
    """One instance's run: the produced kernel's verdict, what was applied, what it bought."""

    name: str
    accepted: bool
    category: str
    status: str
    applied: list[str] = field(default_factory=list)
    operators: list[str] = field(default_factory=list)
    gated: int = 0
    speedup: float | None = None
    speedup_vs_torch: float | None = None
    static_effect: list[str] = field(default_factory=list)
    memorization: dict[str, Any] = field(default_factory=dict)
    out_dir: str = ""
    message: str = ""
    elapsed_s: float = 0.0

    @property
    def improved(self) -> bool:
        """A candidate was kept (with --skills all, every kept candidate applied a skill)."""
        return self.status == "improved"

    @property
    def is_copy(self) -> bool:
        return bool(self.memorization.get("is_copy"))

    def progress_line(self) -> str:
        return f"{self.name}: {self.category or '?'} {self.status}, {len(self.applied)} skill(s) ({self.elapsed_s:.0f} s)"

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "accepted": self.accepted,
            "category": self.category,
            "status": self.status,
            "improved": self.improved,
            "applied": self.applied,
            "operators": self.operators,
            "gated": self.gated,
            "speedup": self.speedup,
            "speedup_vs_torch": self.speedup_vs_torch,
            "static_effect": self.static_effect,
            "memorization": self.memorization,
            "out_dir": self.out_dir,
            "message": self.message,
            "elapsed_s": round(self.elapsed_s, 2),
        }


def geomean(xs: Sequence[float]) -> float | None:
    xs = [x for x in xs if x and x > 0]
    return math.exp(sum(math.log(x) for x in xs) / len(xs)) if xs else None


@dataclass
class HeldoutReport:
    backend: str
    provider: str
    skills_mode: str
    order: str
    budget: int
    instances: list[InstanceResult]
    carriers: list[CarrierCheck]

    @property
    def pass_rate(self) -> float:
        return sum(r.accepted for r in self.instances) / len(self.instances) if self.instances else 0.0

    @property
    def improved_rate(self) -> float:
        return sum(r.improved for r in self.instances) / len(self.instances) if self.instances else 0.0

    @property
    def geomean_speedup(self) -> float | None:
        return geomean([r.speedup for r in self.instances if r.speedup])

    @property
    def geomean_vs_torch(self) -> float | None:
        return geomean([r.speedup_vs_torch for r in self.instances if r.speedup_vs_torch])

    @property
    def copies(self) -> list[str]:
        return [r.name for r in self.instances if r.is_copy]

    @property
    def bad_carriers(self) -> list[CarrierCheck]:
        return [c for c in self.carriers if not c.ok]

    def failures(self) -> list[str]:
        """Why the bar fails, one line each (empty: the bar holds)."""
        out = []
        if self.pass_rate < PASS_BAR:
            bad = ", ".join(r.name for r in self.instances if not r.accepted)
            out.append(f"pass rate {self.pass_rate:.0%} < {PASS_BAR:.0%} (rejected: {bad})")
        if self.copies:
            out.append(f"copies of expert sources: {', '.join(self.copies)}")
        if self.bad_carriers:
            out.append(
                "carriers over {:.0%} of their source: {}".format(
                    CARRIER_MAX_FRACTION,
                    ", ".join(f"{c.skill_id} ({c.workload} {c.fraction:.0%})" for c in self.bad_carriers),
                )
            )
        if self.skills_mode == "all" and self.order == "curriculum":
            if self.improved_rate < IMPROVED_BAR:
                out.append(f"improved by a skill: {self.improved_rate:.0%} < {IMPROVED_BAR:.0%}")
            g = self.geomean_speedup
            if self.backend == "cuda" and (g is None or g < SPEEDUP_BAR):
                out.append(f"geometric-mean speedup over naive {g or 0:.2f}x < {SPEEDUP_BAR:.1f}x")
        return out

    def to_dict(self) -> dict[str, Any]:
        return {
            "backend": self.backend,
            "provider": self.provider,
            "skills": self.skills_mode,
            "order": self.order,
            "budget": self.budget,
            "instances": [r.to_dict() for r in self.instances],
            "pass_rate": self.pass_rate,
            "improved_rate": self.improved_rate,
            "geomean_speedup": self.geomean_speedup,
            "geomean_vs_torch": self.geomean_vs_torch,
            "copies": self.copies,
            "carriers": [c.to_dict() for c in self.carriers],
            "bar": {
                "pass_rate": PASS_BAR,
                "improved_rate": IMPROVED_BAR,
                "speedup": SPEEDUP_BAR,
                "carrier_fraction": CARRIER_MAX_FRACTION,
            },
            "failures": self.failures(),
            "ok": not self.failures(),
        }


def run_heldout(
    skills: Sequence[Skill],
    make_provider: Callable[[], Any],
    *,
    backend: str = "emu",
    budget: int = 10,
    skills_mode: str = "all",
    order: str = "curriculum",
    seed: int = 0,
    names: Sequence[str] | None = None,
    root: Path | None = None,
    out_dir: Path | None = None,
    store: Any = None,
    timeout_s: float = 120.0,
    progress: Callable[[InstanceResult], None] | None = None,
    jobs: int = 1,
    include_unverified: bool = False,
) -> HeldoutReport:
    """Materialize every (or every named) instance from its naive kernel; gate and copy-check each."""
    from klineage.gates.backend import GateOptions
    from klineage.materialize.loop import MaterializeOptions, materialize

    root = root or heldout_dir()
    known = instance_names(root)
    chosen = list(names) if names else known
    unknown = [n for n in chosen if n not in known]
    if unknown:
        raise KLineageError(f"unknown held-out instance(s): {', '.join(unknown)} (known: {', '.join(known)})")
    experts = expert_sources(repo_root())
    stamp = time.strftime("%Y%m%d-%H%M%S")
    base = out_dir or Path("materialized") / f"heldout-{stamp}"

    def one(name: str) -> tuple[InstanceResult, str]:
        t0 = time.perf_counter()
        wl = load_workload(root / name)
        provider = make_provider()
        opts = MaterializeOptions(
            backend=backend,
            skills_mode=skills_mode,
            order=order,
            seed=seed,
            out_dir=base / name,
            store=store,
            include_unverified=include_unverified,
            gate_options=GateOptions(backend=backend, timeout_s=timeout_s),
        )
        try:
            res = materialize(wl, (root / name / "naive.cu").read_text(), skills, provider, budget, opts)
            if store is not None:
                from klineage.admission import record_admissions

                record_admissions(store, res)
        except KLineageError:
            raise
        except Exception as e:  # one instance's failure is a rejected instance, not the end of the check
            return InstanceResult(
                name,
                False,
                "crash",
                "error",
                message=f"{type(e).__name__}: {e}",
                elapsed_s=time.perf_counter() - t0,
            ), provider.name
        if res.best_step is None:
            accepted, category = bool(res.start_gate.get("accepted")), str(res.start_gate.get("category", ""))
            message = res.stop_reason
        else:
            kept = next(s for s in res.steps if s.index == res.best_step)
            accepted, category, message = kept.accepted, kept.category, kept.reason
        static = [s.reason for s in res.steps if s.kept and s.reason.startswith("static effect")]
        mem = check_kernel(res.best_source, experts).to_dict()
        mem.pop(
            "per_source", None
        )  # the closest source and the verdict are the table's; the trace has the rest
        ops = [s.operator for s in res.steps if s.kept and s.operator]
        return InstanceResult(
            name,
            accepted,
            category,
            res.status,
            list(res.applied),
            ops,
            res.gated,
            res.speedup,
            res.speedup_vs_torch,
            static,
            mem,
            res.out_dir,
            message,
            time.perf_counter() - t0,
        ), provider.name

    # Instances run `jobs` at a time (threads: the gates run in child processes, builds in
    # parallel; cuda children hold their GPU's lock, so timings never overlap). Results keep the
    # instance order whatever finishes first.
    results: list[InstanceResult] = []
    provider_name = ""
    with ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
        futures = [pool.submit(one, name) for name in chosen]
        for fut in futures:
            r, provider_name = fut.result()
            results.append(r)
            if progress is not None:
                progress(r)
    return HeldoutReport(
        backend, provider_name, skills_mode, order, budget, results, check_carriers(skills, experts)
    )


def print_report(rep: HeldoutReport, console: Any) -> None:
    """The table: instance, gate verdict, skills applied, speedup (GPU) or static effect (CPU), copy check."""
    from rich.markup import escape
    from rich.table import Table

    gpu = rep.backend == "cuda"
    table = Table(
        title=f"klineage heldout ({rep.provider}, {rep.backend}, skills {rep.skills_mode}, order {rep.order})"
    )
    for col in (
        "instance",
        "gate",
        "skills applied (op: without skills)",
        "speedup over naive" if gpu else "static effect",
        "copy check",
    ):
        table.add_column(col, overflow="fold")
    for r in rep.instances:
        if gpu:
            effect = f"{r.speedup:.2f}x" if r.speedup else "-"
            effect += f" ({r.speedup_vs_torch:.2f}x vs torch)" if r.speedup_vs_torch else ""
        else:
            effect = "; ".join(s.removeprefix("static effect present: ") for s in r.static_effect) or "-"
        near = r.memorization.get("closest") or {}
        verdict = "[red]COPY[/]" if r.is_copy else "no copy"
        copy = f"{verdict} (closest {escape(str(near.get('source', '-')))}: ast {near.get('ast', 0):.2f})"
        gate = "ok" if r.accepted else f"[red]{escape(r.category)}[/]"
        applied = ", ".join(r.applied) or ", ".join(f"op:{o}" for o in r.operators) or "-"
        table.add_row(r.name, gate, escape(applied), escape(effect), copy)
    console.print(table)
    g, t = rep.geomean_speedup, rep.geomean_vs_torch
    line = f"pass rate {rep.pass_rate:.0%}, improved by a skill {rep.improved_rate:.0%}"
    if g:
        line += f", geomean speedup {g:.2f}x over naive" + (f", {t:.2f}x over torch" if t else "")
    line += (
        f", copies {len(rep.copies)}, carriers over the bar {len(rep.bad_carriers)} of {len(rep.carriers)}"
    )
    console.print(line, highlight=False)
    for f in rep.failures():
        console.print(f"[red]below the bar:[/] {escape(f)}", highlight=False)
