"""The budgeted optimize loop: `materialize(workload, start_source, skills, provider, budget, options)`.

Profile the current kernel (gate it: ptxas resources always, timing on the GPU), rank the skills
that match it, ask the provider for a candidate for the first untried one, gate it, keep it if it
is correct and better, record the step; re-rank on the new kernel after each kept step. Stops at
`budget` gated candidates, when nothing applicable is left untried, or when the provider cannot go
on (cost limit, API failure). Provider answers that are not gated (no code in a reply, the same
candidate again) cost no budget but are recorded; at most `max_proposals` are asked for.

A move that was gated and not kept is not offered again until a structural step (one that changes
how the work is laid out, not a local rewrite) has been kept: a local step does not change what
decided the verdict, and re-gating it spends budget on timing noise. With a tournament, the
alternatives that lost are parked as lines of their own; when the leading line runs dry with
budget left, the loop goes back to the fastest parked line and continues it, moves that paid on the
line it leaves first and moves that were slower there last. The best kernel over all lines is the
answer (a later line's kernel has to beat it by more than the timing spread).
"""

from __future__ import annotations

import dataclasses
import random
import time
import uuid
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from klineage.deopt.registry import operators as all_operators
from klineage.errors import KLineageError, SourceError
from klineage.gates.backend import GateOptions
from klineage.gates.gate import gate
from klineage.gates.result import GateResult
from klineage.llm.base import CostLimitReached, LLMError
from klineage.materialize.alternatives import alternatives
from klineage.materialize.curriculum import ORDERS, rank
from klineage.materialize.judge import judge
from klineage.materialize.lines import Line, Tried, faster, go_back, hold_tournament, outcome, structural
from klineage.materialize.matching import MatchReport, Target, forward_sites, match_skills
from klineage.materialize.measured import MeasuredTimes
from klineage.materialize.providers.base import Move, ProposalRequest, Provider
from klineage.materialize.record import RunRecorder, device_of, safe_name
from klineage.skills import Skill
from klineage.source.digest import source_hash
from klineage.source.model import CudaSource
from klineage.store.db import Store
from klineage.workload import Workload

SKILLS_MODES = ("all", "none")
DEFAULT_BUDGET = 10


@dataclass
class MaterializeOptions:
    backend: str = "emu"
    skills_mode: str = "all"
    order: str = "curriculum"
    seed: int = 0
    out_dir: Path | None = None
    store: Store | None = None
    gate_options: GateOptions | None = None
    timeout_s: float = 120.0
    max_proposals: int | None = None  # default: 3 x budget
    progress: Callable[[StepRecord], None] | None = None  # after each step
    announce: Callable[[str], None] | None = None  # what the loop is doing now (a spinner's text)
    start_name: str = "start.cu"
    measured: MeasuredTimes | None = None  # GPU times measured elsewhere: the judge's GPU rule on a CPU run
    tournament: bool | None = None  # gate alternative skills side by side; None: when the judge has times


@dataclass
class StepRecord:
    index: int
    move: str
    skill_id: str | None
    operator: str | None
    sites: list[str]
    note: str = ""
    verdict: str = ""  # kept | rejected | not_faster | no_effect | no_candidate | duplicate
    reason: str = ""
    kept: bool = False
    gated: bool = False
    accepted: bool = False
    category: str = ""
    message: str = ""
    candidate_file: str | None = None
    kernel_hash: str | None = None
    gate_key: str | None = None
    time_ms: float | None = None
    resources: dict[str, Any] = field(default_factory=dict)
    detail: dict[str, Any] = field(default_factory=dict)
    cost_usd: float = 0.0
    usage: dict[str, int] = field(default_factory=dict)
    exchange_ids: list[str] = field(default_factory=list)
    elapsed_s: float = 0.0
    ranked: list[str] = field(default_factory=list)
    group: int | None = None  # the tournament (index of its first step) this step was gated in
    best_file: str | None = None  # the best kernel after this step (None: the start kernel)
    line: int | None = None  # the step whose parked candidate this step's line continues (None: the first line)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class MaterializeResult:
    run_id: str
    workload: str
    status: str  # improved | no_improvement | start_rejected
    stop_reason: str
    provider: str
    model: str | None
    skills_mode: str
    order: str
    backend: str
    budget: int
    gated: int
    start_gate: dict[str, Any]
    best_source: str
    best_step: int | None
    start_time_ms: float | None
    best_time_ms: float | None
    torch_time_ms: float | None
    applied: list[str]
    steps: list[StepRecord]
    skipped_at_start: list[tuple[str, str]]
    cost: dict[str, Any] | None
    out_dir: str
    elapsed_s: float
    timed_by: str | None = None  # where the judge's times came from: the gate, measured elsewhere, or None
    unmeasured: list[str] = field(default_factory=list)  # correct candidates judged without a time (hashes)

    @property
    def speedup(self) -> float | None:
        """Start over best time (GPU); None without timing."""
        if self.start_time_ms and self.best_time_ms:
            return self.start_time_ms / self.best_time_ms
        return None

    @property
    def speedup_vs_torch(self) -> float | None:
        if self.torch_time_ms and self.best_time_ms:
            return self.torch_time_ms / self.best_time_ms
        return None

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d.pop("best_source")
        d["speedup"] = self.speedup
        d["speedup_vs_torch"] = self.speedup_vs_torch
        return d


def _ms(r: GateResult) -> float | None:
    return r.timing.median_ms if r.timing else None


def _resources(r: GateResult) -> dict[str, Any]:
    return {k: asdict(v) for k, v in r.resources.items()}


def _moves(src: CudaSource, skills: Sequence[Skill], provider: Provider, target: Target, mode: str, order: str,
           rng: random.Random, applied_ops: list[str]) -> tuple[list[Move], MatchReport]:
    """The ranked moves for the current kernel, and the matching report (skips with reasons)."""
    if mode == "none":
        if not provider.mechanical:
            return [Move("free")], MatchReport()
        moves = []
        for op in all_operators():
            if not op.mechanical_apply:
                continue
            try:
                sites, _bad = forward_sites(op, src)
            except Exception:  # an operator bug: that operator offers no move here
                continue
            if sites:
                moves.append(Move(f"op:{op.name}", None, op, tuple(sites)))
        if order == "random":
            rng.shuffle(moves)
        return moves, MatchReport()
    report = match_skills(src, skills, target, mechanical_only=provider.mechanical)
    ranked = rank(report.applicable, order, rng, applied_ops)
    return [Move(m.skill.skill_id, m.skill, m.operator, tuple(m.sites)) for m in ranked], report


def materialize(
    workload: Workload,
    start_source: str,
    skills: Sequence[Skill],
    provider: Provider,
    budget: int = DEFAULT_BUDGET,
    options: MaterializeOptions | None = None,
) -> MaterializeResult:
    """Apply skills to `start_source` under the gate; see the module docstring."""
    opts = options or MaterializeOptions()
    if opts.skills_mode not in SKILLS_MODES:
        raise KLineageError(f"unknown skills mode '{opts.skills_mode}' (known: {', '.join(SKILLS_MODES)})")
    if opts.order not in ORDERS:
        raise KLineageError(f"unknown order '{opts.order}' (known: {', '.join(ORDERS)})")
    if budget < 1:
        raise KLineageError("--budget must be at least 1")
    t0 = time.perf_counter()
    run_id = uuid.uuid4().hex[:12]
    out_dir = opts.out_dir or Path("materialized") / workload.name / run_id
    gopts = opts.gate_options or GateOptions(backend=opts.backend, timeout_s=opts.timeout_s)
    rng = random.Random(opts.seed)
    rec = RunRecorder(opts.store, out_dir, run_id, workload.name)
    provider.set_recorder(rec.exchange)
    rec.start(provider.name, provider.model, opts.skills_mode, opts.order, budget, gopts.backend)
    max_proposals = opts.max_proposals or 3 * budget
    run_skills = list(skills) if opts.skills_mode == "all" else []

    def say(text: str) -> None:
        if opts.announce is not None:
            opts.announce(text)

    start_path = rec.write_source(opts.start_name, start_source)
    say(f"gating the start kernel {opts.start_name}")
    rec.kernel(start_source, "naive", start_path)
    start_gate = gate(start_source, workload, gopts, name=opts.start_name)
    rec.gate_run(start_source, start_gate)
    steps: list[StepRecord] = []
    skipped_at_start: list[tuple[str, str]] = []
    gated = 0
    stop_reason = ""

    unmeasured: list[str] = []
    timed_by = (f"the {gopts.backend} gate" if start_gate.timing is not None
                else f"measured on {opts.measured.device}: {', '.join(opts.measured.files)}" if opts.measured is not None
                else None)

    def judged(text: str, r: GateResult) -> GateResult:
        """The gate's result with the measured GPU time where the gate itself timed nothing."""
        if r.timing is not None or opts.measured is None or not r.accepted:
            return r
        t = opts.measured.lookup(workload.name, text)
        if t is None:
            if (h := source_hash(text)) not in unmeasured:
                unmeasured.append(h)
            return r
        return dataclasses.replace(r, timing=t)

    start_timed = judged(start_source, start_gate)  # with its measured time, if any
    line = Line(start_source, start_timed, None, None, None, [], [], source_hash(start_source))
    best = line  # the best kernel over all lines (a line's head; replaced, never mutated)

    def result(status: str) -> MaterializeResult:
        ledger = provider.ledger
        return MaterializeResult(
            run_id=run_id, workload=workload.name, status=status, stop_reason=stop_reason, provider=provider.name,
            model=provider.model, skills_mode=opts.skills_mode, order=opts.order, backend=gopts.backend, budget=budget,
            gated=gated, start_gate=start_gate.to_dict(), best_source=best.source, best_step=best.step,
            start_time_ms=_ms(start_timed), best_time_ms=_ms(best.gate),
            torch_time_ms=best.gate.timing.reference_median_ms if best.gate.timing else None,
            applied=list(best.applied), steps=steps, skipped_at_start=skipped_at_start,
            cost=ledger.to_dict() if ledger is not None else None, out_dir=str(out_dir),
            elapsed_s=time.perf_counter() - t0, timed_by=timed_by, unmeasured=list(unmeasured),
        )

    def save(status: str) -> MaterializeResult:
        res = result(status)
        rec.write_trace(res.to_dict())
        return res

    if not start_gate.accepted:
        stop_reason = (f"the start kernel fails its own gate ({start_gate.category}: {start_gate.message}); "
                       "nothing to improve from")
        res = save("start_rejected")
        rec.finish("start_rejected", None, {"stop_reason": stop_reason})
        return res

    target = Target(workload.name, tuple(workload.dtypes), device_of(start_gate))
    attempts: Counter[tuple[str, str]] = Counter()
    seen = {source_hash(start_source)}
    feedback = ""
    proposals = 0
    parked: list[Line] = []  # tournament losers that beat the kernel they started from: lines to go back to
    # a tournament needs times to pick by: a timing backend, or times measured elsewhere (forced on
    # without them, it gates the alternatives for a later round to time, and the first one holds)
    tournament = opts.tournament if opts.tournament is not None else (gopts.backend == "cuda" or opts.measured is not None)

    def limit(m: Move) -> int:
        return max_proposals if m.key == "free" else provider.attempts_per_move

    def memo(m: Move) -> str:
        """What a move's attempts are counted by: the operator for a mechanical provider (every
        skill of one operator gives the same candidate), else the move itself."""
        return f"op:{m.operator.name}" if provider.mechanical and m.operator is not None else m.key

    def attempt(move: Move, index: int, ranked: list[str]) -> tuple[StepRecord, str | None, GateResult | None]:
        """Ask for one candidate of `move` on the line's head, gate it and judge it against the
        head: (the step, the candidate, its gate result with any measured time)."""
        nonlocal gated
        step = StepRecord(index, move.key, move.skill.skill_id if move.skill else None,
                          move.operator.name if move.operator else None,
                          [f"line {s.line}: {s.summary}" for s in move.sites], ranked=ranked, line=line.origin)
        rec.step_index = step.index
        t_step = time.perf_counter()
        request = ProposalRequest(workload, line.source, move, feedback, step.index, gopts.backend, run_skills)
        say(f"step {step.index}: {move.label}: asking {provider.name}")
        proposal = provider.propose(request)  # CostLimitReached / LLMError end the run (caller)
        step.note, step.cost_usd = proposal.note, proposal.cost_usd
        step.usage, step.exchange_ids = proposal.usage, proposal.exchange_ids
        cand, r = proposal.source, None
        if cand is None:
            step.verdict, step.reason = "no_candidate", proposal.note
        elif source_hash(cand) in seen:
            step.verdict, step.reason = "duplicate", "this candidate was already gated in this run"
            cand = None
        else:
            seen.add(source_hash(cand))
            name = f"step-{step.index:02d}-{safe_name(move.label)}.cu"
            path = rec.write_source(name, cand)
            step.candidate_file, step.kernel_hash = name, rec.kernel(cand, "candidate", path)
            say(f"step {step.index}: {move.label}: gating {name} ({gated + 1}/{budget})")
            raw = gate(cand, workload, gopts, name=name)
            rec.gate_run(cand, raw)
            gated += 1
            r = judged(cand, raw)
            v = judge(line.source, cand, line.gate, r, move.operator)
            step.gated, step.accepted, step.category, step.message = True, r.accepted, r.category, r.message
            step.gate_key, step.time_ms, step.resources = r.artifact_id, _ms(r), _resources(r)
            step.verdict, step.reason, step.kept, step.detail = v.verdict, v.reason, v.kept, v.detail
            if r.timing is not None and raw.timing is None:
                step.detail["timed_by"] = r.timing.extra.get("measured")
            if r.profile.get("ncu"):
                step.detail["ncu"] = r.profile["ncu"]  # --ncu: the profiler's metrics of this candidate
        step.elapsed_s = time.perf_counter() - t_step
        return step, cand, r

    while True:
        if gated >= budget:
            stop_reason = f"budget of {budget} gated candidates spent"
            break
        if proposals >= max_proposals:
            stop_reason = f"{max_proposals} proposals made without spending the budget"
            break
        try:
            src = CudaSource.from_text(line.source, "current.cu")
        except SourceError as e:  # the gate accepted it, so this is a parser gap: stop cleanly
            stop_reason = f"the current kernel cannot be analysed: {e}"
            break
        moves, report = _moves(src, run_skills, provider, target, opts.skills_mode, opts.order, rng, line.applied_ops)
        if not steps:
            skipped_at_start = list(report.skipped)
        open_moves = [m for m in moves if attempts[(line.epoch, memo(m))] < limit(m)]
        if line.hints:  # a line gone back to: what paid on the line it came from first, what was slower last
            open_moves.sort(key=lambda m: line.hints.get(memo(m), 1))
        if not open_moves:
            if parked:
                line = go_back(parked, line)
                say(f"going back to the line of step {line.origin}")
                continue
            stop_reason = ("no applicable skill left to try" if opts.skills_mode == "all"
                           else "no operator site left to try")
            break
        group = [open_moves[0]]
        if tournament:
            group += alternatives(src, open_moves[0], open_moves[1:])
        ranked = [m.key for m in moves]
        tried: list[Tried] = []
        keys: list[str] = []
        ended = False
        for move in group:
            if tried and (gated >= budget or proposals >= max_proposals):
                break
            key = memo(move)
            attempts[(line.epoch, key)] += 1
            proposals += 1
            try:
                tried.append(attempt(move, len(steps) + len(tried) + 1, ranked))
                keys.append(key)
            except CostLimitReached as e:
                stop_reason, ended = str(e), True
                break
            except LLMError as e:
                stop_reason, ended = f"provider error: {e}", True
                break
        head_leads = best is line
        winner, losers = hold_tournament(tried, len(group) > 1, head_leads, best)
        for key, (step, _cand, _r) in zip(keys, tried, strict=True):
            line.tried[key] = outcome(step)
        parked += [line.branch(*loser) for loser in losers]
        if winner is not None:
            line = line.extend(*winner, structural=structural(winner[0].operator))
            if head_leads or faster(line.gate, best.gate):
                best = line
            feedback = ""
        for step, _cand, _r in tried:
            if winner is None and step.verdict != "duplicate":
                feedback = (f"{step.candidate_file} was not kept ({step.verdict}): {step.reason}"
                            if step.candidate_file else step.reason)
            steps.append(step)
            rec.step(step.to_dict() | {"time_ms": step.time_ms})
            if opts.progress is not None:
                opts.progress(step)
        rec.write_trace(result("running").to_dict())
        if ended:
            break

    status = "improved" if best.step is not None else "no_improvement"
    rec.write_source("best.cu", best.source)
    res = save(status)
    rec.finish(status, source_hash(best.source), {"stop_reason": stop_reason, "gated": gated, "applied": best.applied,
                                                 "speedup": res.speedup, "cost": res.cost})
    return res
