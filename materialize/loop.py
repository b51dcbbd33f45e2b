"""The budgeted optimize loop: `materialize(workload, start_source, skills, provider, budget, options)`.

Profile the current kernel (gate it: ptxas resources always, timing on the GPU), rank the skills
that match it, ask the provider for a candidate for the first untried one, gate it, keep it if it
is correct and better, record the step; re-rank on the new kernel after each kept step. Stops at
`budget` gated candidates, when nothing applicable is left untried, or when the provider cannot go
on (cost limit; an API failure ends the run with status `provider_failed`). Whatever ends a run,
an exception included, its row is closed with a status and the reason, never left `running`.
An LLM provider is given the skills that match the current kernel, in curriculum order (its
prompt carries their cards). Provider answers that are not gated (no code in a reply, the same
candidate again) cost no budget but are recorded; at most `max_proposals` are asked for.

A move that was gated and not kept is not offered again until a structural step (one that changes
how the work is laid out, not a local rewrite) has been kept: a local step does not change what
decided the verdict, and re-gating it spends budget on timing noise. With a tournament, the
alternatives that lost are parked as lines of their own; when the leading line runs dry with
budget left, the loop goes back to the fastest parked line and continues it, moves that paid on the
line it leaves first and moves that were slower there last. The best kernel over all lines is the
answer (a later line's kernel has to beat it by more than the timing spread). A structural step
that is correct but not faster is parked the same way (an enabling step: shared-memory tiling of a
GEMM pays only once register blocking is built on it), so a line that runs dry goes back to it.

With `explore`, once the curriculum's skills have run out on the current line, the loop goes on
with the operator library itself: every operator's mechanical forward step that finds a site (an
LLM provider: free attempts guided by gate feedback), as `--skills none` would. Those steps are
marked `explored` and reported apart from the skills' steps, so the comparison with `none` says
what the skills add and what exploration adds after them.
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
from klineage.gates.cuda.stats import VERY_SLOW_MS
from klineage.gates.gate import gate
from klineage.gates.result import GateResult
from klineage.llm.base import CostLimitReached, LLMError
from klineage.materialize.alternatives import alternatives
from klineage.materialize.curriculum import ORDERS, rank
from klineage.materialize.judge import judge
from klineage.materialize.lines import (
    Line,
    Tried,
    enabling,
    faster,
    go_back,
    hold_tournament,
    outcome,
    structural,
)
from klineage.materialize.matching import (
    MatchReport,
    Target,
    bench_launch_values,
    forward_sites,
    match_skills,
)
from klineage.materialize.measured import MeasuredTimes
from klineage.materialize.providers.base import Move, ProposalRequest, Provider
from klineage.materialize.record import RunRecorder, device_of, safe_name
from klineage.skills import Skill, offered
from klineage.source.canon import canonical_form
from klineage.source.digest import source_hash
from klineage.source.model import CudaSource
from klineage.store.db import Store
from klineage.workload import Workload

SKILLS_MODES = ("all", "none")
DEFAULT_BUDGET = 10
#: a line head this slow a launch (ms) makes its candidates expected to be very slow as well
EXPECT_VERY_SLOW_MS = VERY_SLOW_MS / 2
#: seconds of timed launches a candidate gets (the gate's own defaults: 30 s, and 2 s from 20 ms a
#: launch): a candidate is judged against its line's head by the spread of trial medians, which
#: tens of repetitions of a multi-millisecond kernel settle; kernels under ~3 ms a launch keep the
#: full 3 x 50 repetitions
CANDIDATE_TIMING = {"timing_budget_s": 1.0, "slow_budget_s": 1.0}


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
    include_unverified: bool = (
        False  # also offer skills whose every roundtrip failed (klineage.skills.offered)
    )
    explore: bool = False  # skills run out: go on with every operator's forward step (reported apart)


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
    line: int | None = (
        None  # the step whose parked candidate this step's line continues (None: the first line)
    )
    explored: bool = False  # the move came from exploration (no skill offered it), not from a skill

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class MaterializeResult:
    run_id: str
    workload: str
    status: str  # improved | no_improvement | start_rejected | provider_failed
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
    explore: bool = False  # the run went on with the operator library after the skills ran out
    explored: list[str] = field(default_factory=list)  # the best kernel's steps that came from exploration
    canonical: list[str] = field(default_factory=list)  # canon rules the start was rewritten by first

    @property
    def origins(self) -> dict[str, dict[str, int]]:
        """Gated and kept candidates by where their move came from: `skills` (a matched skill, or
        an operator under `--skills none`) and `explore` (after the skills ran out)."""
        out = {k: {"gated": 0, "kept": 0} for k in ("skills", "explore")}
        for s in self.steps:
            tally = out["explore" if s.explored else "skills"]
            tally["gated"] += int(s.gated)
            tally["kept"] += int(s.kept)
        return out

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
        d["origins"] = self.origins
        return d


def _ms(r: GateResult) -> float | None:
    return r.timing.median_ms if r.timing else None


def _torch_ms(r: GateResult) -> float | None:
    return r.timing.reference_median_ms if r.timing else None


def candidate_gate_options(g: GateOptions, head_ms: float | None = None) -> GateOptions:
    """The gate options of a run's candidates: on a timing backend the torch baseline is timed
    once, with the start kernel, not again beside every candidate (a candidate is judged against
    its line's head; timing torch each time doubled a candidate's GPU time in the loop). A
    candidate made from a head of half a second or more a launch (`head_ms`) is expected to be
    very slow too: the gate then takes its one timed launch under the CUPTI trace, one launch of
    seconds where there were two (gates/cuda/profile_stage.py). Timing budgets: CANDIDATE_TIMING,
    unless the caller set its own."""
    if g.backend != "cuda" or not g.time_kernel:
        return g
    extra = {**CANDIDATE_TIMING, **g.extra, "skip_reference": True}
    if head_ms is not None and head_ms >= EXPECT_VERY_SLOW_MS:
        extra["expect_very_slow"] = True
    return dataclasses.replace(g, extra=extra)


def _resources(r: GateResult) -> dict[str, Any]:
    return {k: asdict(v) for k, v in r.resources.items()}


def _operator_moves(
    src: CudaSource, provider: Provider, order: str, rng: random.Random, target: Target
) -> list[Move]:
    """The operator library as moves, no skill needed: every operator's mechanical forward step
    that finds a site in the current kernel (registry order, or shuffled under `random`); an LLM
    provider gets one free move instead (it is guided by gate feedback alone)."""
    if not provider.mechanical:
        return [Move("free")]
    moves = []
    for op in all_operators():
        if not op.mechanical_apply:
            continue
        try:
            sites, _bad = forward_sites(op, src, target.bench)
        except Exception:  # an operator bug: that operator offers no move here
            continue
        if sites:
            moves.append(Move(f"op:{op.name}", None, op, tuple(sites)))
    if order == "random":
        rng.shuffle(moves)
    return moves


def _moves(
    src: CudaSource,
    skills: Sequence[Skill],
    provider: Provider,
    target: Target,
    mode: str,
    order: str,
    rng: random.Random,
    applied_ops: list[str],
) -> tuple[list[Move], MatchReport]:
    """The ranked moves for the current kernel, and the matching report (skips with reasons)."""
    if mode == "none":
        return _operator_moves(src, provider, order, rng, target), MatchReport()
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
    return _Run(workload, skills, provider, budget, opts).run(start_source)


class _Run:
    """One materialization run: the state the loop's steps share (the line being continued, the
    best kernel over all lines, the parked lines, the budget spent) and the steps themselves."""

    def __init__(
        self,
        workload: Workload,
        skills: Sequence[Skill],
        provider: Provider,
        budget: int,
        opts: MaterializeOptions,
    ) -> None:
        self.t0 = time.perf_counter()
        self.workload, self.provider, self.budget, self.opts = workload, provider, budget, opts
        self.run_id = uuid.uuid4().hex[:12]
        self.out_dir = opts.out_dir or Path("materialized") / workload.name / self.run_id
        self.gopts = opts.gate_options or GateOptions(backend=opts.backend, timeout_s=opts.timeout_s)
        self.cand_gopts = candidate_gate_options(self.gopts)
        self.rng = random.Random(opts.seed)
        self.rec = RunRecorder(opts.store, self.out_dir, self.run_id, workload.name)
        provider.set_recorder(self.rec.exchange)
        self.rec.start(
            provider.name, provider.model, opts.skills_mode, opts.order, budget, self.gopts.backend
        )
        self.max_proposals = opts.max_proposals or 3 * budget
        self.run_skills, self.held_back = (
            offered(list(skills), opts.include_unverified) if opts.skills_mode == "all" else ([], [])
        )
        self.steps: list[StepRecord] = []
        self.canonical: list[str] = []  # the canon rules the first line's head was rewritten by
        self.skipped_at_start: list[tuple[str, str]] = []
        self.gated = 0
        self.proposals = 0
        self.provider_failed = False
        self.moves: list[Move] = []  # this round's ranked moves
        self.stop_reason = ""
        self.feedback = ""
        self.unmeasured: list[str] = []
        self.attempts: Counter[tuple[str, str]] = Counter()
        self.seen: set[str] = set()
        self.parked: list[
            Line
        ] = []  # tournament losers that beat the kernel they started from: lines to go back to
        # a tournament needs times to pick by: a timing backend, or times measured elsewhere (forced on
        # without them, it gates the alternatives for a later round to time, and the first one holds)
        self.tournament = (
            opts.tournament
            if opts.tournament is not None
            else (self.gopts.backend == "cuda" or opts.measured is not None)
        )

    # ---- the run --------------------------------------------------------------------------
    def run(self, start_source: str) -> MaterializeResult:
        if not self._gate_start(start_source):
            self.stop_reason = (
                f"the start kernel fails its own gate ({self.start_gate.category}: "
                f"{self.start_gate.message}); nothing to improve from"
            )
            res = self._save("start_rejected")
            self.rec.finish("start_rejected", None, {"stop_reason": self.stop_reason})
            return res
        self.target = Target(
            self.workload.name,
            tuple(self.workload.dtypes),
            device_of(self.start_gate),
            bench_launch_values(self.workload),
        )
        self.seen.add(source_hash(start_source))
        while self._round():
            pass
        self._fall_back_to_start(start_source)
        status = (
            "provider_failed"
            if self.provider_failed
            else "improved"
            if self.best.step is not None
            else "no_improvement"
        )
        self.rec.write_source("best.cu", self.best.source)
        res = self._save(status)
        self.rec.finish(
            status,
            source_hash(self.best.source),
            {
                "stop_reason": self.stop_reason,
                "gated": self.gated,
                "applied": self.best.applied,
                "speedup": res.speedup,
                "cost": res.cost,
            },
        )
        return res

    def _fall_back_to_start(self, start_source: str) -> None:
        """A timed run answers with the start kernel itself when its best is not faster than the
        start by more than the spread: steps are kept against their line's head, whose own time
        (a canonical form's, a parked line's) can sit a hair above the start's, and a user must
        never get back a kernel that is no faster than the one they gave (held-out maxpool2d on
        the H200: 0.2164 ms kept against a 0.2170 ms head, start 0.2163 ms)."""
        best = self.best
        if best.step is None or best.gate.timing is None or self.start_timed.timing is None:
            return
        if faster(best.gate, self.start_timed):
            return
        self._say(
            f"the best kernel ({_ms(best.gate):.4f} ms) is not faster than the start kernel "
            f"({_ms(self.start_timed):.4f} ms) by more than the spread: the start kernel is the answer"
        )
        self.stop_reason += (
            "; " if self.stop_reason else ""
        ) + f"best kernel {best.file} not faster than the start kernel: the start kernel is the answer"
        self.best = Line.first(start_source, self.start_timed)

    def _gate_start(self, start_source: str) -> bool:
        """Gate the start kernel; the first line starts from it. True when it passes."""
        opts = self.opts
        start_path = self.rec.write_source(opts.start_name, start_source)
        self._say(f"gating the start kernel {opts.start_name}")
        self.rec.kernel(start_source, "naive", start_path)
        self.start_gate = gate(start_source, self.workload, self.gopts, name=opts.start_name)
        self.rec.gate_run(start_source, self.start_gate)
        self.timed_by = (
            f"the {self.gopts.backend} gate"
            if self.start_gate.timing is not None
            else f"measured on {opts.measured.device}: {', '.join(opts.measured.files)}"
            if opts.measured is not None
            else None
        )
        self.start_timed = self._judged(start_source, self.start_gate)  # with its measured time, if any
        head, head_gate = start_source, self.start_timed
        if self.start_gate.accepted:
            head, head_gate = self._canonical_start(start_source)
        self.line = Line.first(head, head_gate)
        self.best = self.line  # the best kernel over all lines (a line's head; replaced, never mutated)
        return self.start_gate.accepted

    def _canonical_start(self, start_source: str) -> tuple[str, GateResult]:
        """The first line's head: the start kernel's canonical form (klineage.source.canon) when
        the rules change it and the gate accepts the result, else the start kernel itself. Skills
        were mined on canonical forms, so their forward sites are found there; this gate run is
        not a candidate (not counted in the budget). A canonical form the gate timed nothing for
        keeps the start's time: the rules respell, they do not change what runs."""
        try:
            canon = canonical_form(CudaSource.from_text(start_source, self.opts.start_name))
        except SourceError:
            return start_source, self.start_timed
        if not canon.changed:
            return start_source, self.start_timed
        text, name = canon.source.text, "start.canonical.cu"
        self.rec.write_source(name, text)
        r = gate(text, self.workload, self.cand_gopts, name=name)  # torch is timed with the start
        self.rec.gate_run(text, r)
        rules = list(dict.fromkeys(canon.applied))
        if not r.accepted:
            self._say(
                f"canonical form of the start kernel rejected ({r.category}); starting from it as given"
            )
            return start_source, self.start_timed
        self.canonical = rules
        self._say(f"starting from the canonical form of the start kernel ({', '.join(rules)})")
        judged = self._judged(text, r)
        if judged.timing is None and self.start_timed.timing is not None:
            judged = dataclasses.replace(judged, timing=self.start_timed.timing)
        return text, judged

    def _round(self) -> bool:
        """Pick the next move (and its alternatives), gate them, settle the tournament; False
        when the run stops."""
        if self.gated >= self.budget:
            self.stop_reason = f"budget of {self.budget} gated candidates spent"
            return False
        if self.proposals >= self.max_proposals:
            self.stop_reason = f"{self.max_proposals} proposals made without spending the budget"
            return False
        try:
            src = CudaSource.from_text(self.line.source, "current.cu")
        except SourceError as e:  # the gate accepted it, so this is a parser gap: stop cleanly
            self.stop_reason = f"the current kernel cannot be analysed: {e}"
            return False
        self.moves, report = _moves(
            src,
            self.run_skills,
            self.provider,
            self.target,
            self.opts.skills_mode,
            self.opts.order,
            self.rng,
            self.line.applied_ops,
        )
        moves = self.moves
        if not self.steps:
            self.skipped_at_start = self.held_back + list(report.skipped)
        open_moves = self._open(moves)
        explored = False
        if not open_moves and self.opts.explore and self.opts.skills_mode == "all":
            # the skills ran out on this line: the operator library, counted apart from the skills
            moves = _operator_moves(src, self.provider, self.opts.order, self.rng, self.target)
            open_moves, explored = self._open(moves), True
        if not open_moves:
            if self.parked:
                self.line = go_back(self.parked, self.line)
                self._say(f"going back to the line of step {self.line.origin}")
                return True
            self.stop_reason = (
                "no applicable skill or operator site left to try"
                if explored
                else "no applicable skill left to try"
                if self.opts.skills_mode == "all"
                else "no operator site left to try"
            )
            return False
        group = [open_moves[0]]
        if self.tournament:
            group += alternatives(src, open_moves[0], open_moves[1:])
        tried, keys, ended = self._gate_group(group, [m.key for m in moves], explored)
        self._settle(len(group) > 1, tried, keys)
        return not ended

    def _open(self, moves: list[Move]) -> list[Move]:
        """The moves not yet tried to their limit on this line since its last structural step; on
        a line gone back to, what paid on the line it came from first and what was slower last."""
        open_moves = [m for m in moves if self.attempts[(self.line.epoch, self._memo(m))] < self._limit(m)]
        if self.line.hints:
            open_moves.sort(key=lambda m: self.line.hints.get(self._memo(m), 1))
        return open_moves

    def _gate_group(
        self, group: list[Move], ranked: list[str], explored: bool = False
    ) -> tuple[list[Tried], list[str], bool]:
        """Ask for and gate a candidate of each move of the group (while budget lasts): the tried
        ones, the keys their attempts count under, and whether the provider ended the run.
        `explored`: the group came from the operator library, not from skills."""
        tried: list[Tried] = []
        keys: list[str] = []
        for move in group:
            if tried and (self.gated >= self.budget or self.proposals >= self.max_proposals):
                break
            key = self._memo(move)
            self.attempts[(self.line.epoch, key)] += 1
            self.proposals += 1
            try:
                tried.append(self._attempt(move, len(self.steps) + len(tried) + 1, ranked, explored))
                keys.append(key)
            except CostLimitReached as e:
                self.stop_reason = str(e)
                return tried, keys, True
            except LLMError as e:
                self.stop_reason, self.provider_failed = f"provider error: {e}", True
                return tried, keys, True
            except (
                BaseException
            ) as e:  # a bug, Ctrl-C: the run's row and trace are closed, then it propagates
                self.stop_reason = f"{type(e).__name__}: {e}"
                status = "interrupted" if isinstance(e, KeyboardInterrupt) else "failed"
                self._save(status)
                self.rec.finish(status, None, {"stop_reason": self.stop_reason, "gated": self.gated})
                raise
        return tried, keys, False

    def _settle(self, contest: bool, tried: list[Tried], keys: list[str]) -> None:
        """The tournament's winner extends the line (and may become the best), the losers that
        beat the head are parked as lines; the steps are recorded."""
        line = self.line
        head_leads = self.best is line
        winner, losers = hold_tournament(tried, contest, head_leads, self.best)
        for key, (step, _cand, _r) in zip(keys, tried, strict=True):
            line.tried[key] = outcome(step)
        self.parked += [line.branch(*loser) for loser in losers]
        self.parked += [line.branch(*t) for t in tried if enabling(*t)]
        if winner is not None:
            self.line = line.extend(*winner, structural=structural(winner[0].operator))
            if head_leads or faster(self.line.gate, self.best.gate):
                self.best = self.line
            self.feedback = ""
        for step, _cand, _r in tried:
            if winner is None and step.verdict != "duplicate":
                self.feedback = (
                    f"{step.candidate_file} was not kept ({step.verdict}): {step.reason}"
                    if step.candidate_file
                    else step.reason
                )
            self.steps.append(step)
            self.rec.step(step.to_dict() | {"time_ms": step.time_ms})
            if self.opts.progress is not None:
                self.opts.progress(step)
        self.rec.write_trace(self._result("running").to_dict())

    # ---- one candidate --------------------------------------------------------------------
    def _attempt(self, move: Move, index: int, ranked: list[str], explored: bool = False) -> Tried:
        """Ask for one candidate of `move` on the line's head, gate it and judge it against the
        head: (the step, the candidate, its gate result with any measured time)."""
        step = StepRecord(
            index,
            move.key,
            move.skill.skill_id if move.skill else None,
            move.operator.name if move.operator else None,
            [f"line {s.line}: {s.summary}" for s in move.sites],
            ranked=ranked,
            line=self.line.origin,
            explored=explored,
        )
        self.rec.step_index = step.index
        t_step = time.perf_counter()
        matched = [
            m.skill for m in self.moves if m.skill is not None
        ]  # the current kernel's, in curriculum order
        request = ProposalRequest(
            self.workload, self.line.source, move, self.feedback, step.index, self.gopts.backend, matched
        )
        self._say(f"step {step.index}: {move.label}: asking {self.provider.name}")
        proposal = self.provider.propose(request)  # CostLimitReached / LLMError end the run (caller)
        step.note, step.cost_usd = proposal.note, proposal.cost_usd
        step.usage, step.exchange_ids = proposal.usage, proposal.exchange_ids
        cand, r = proposal.source, None
        if cand is None:
            step.verdict, step.reason = "no_candidate", proposal.note
        elif source_hash(cand) in self.seen:
            step.verdict, step.reason = "duplicate", "this candidate was already gated in this run"
            cand = None
        else:
            self.seen.add(source_hash(cand))
            r = self._gate_candidate(step, move, cand)
        step.elapsed_s = time.perf_counter() - t_step
        return step, cand, r

    def _gate_candidate(self, step: StepRecord, move: Move, cand: str) -> GateResult:
        """Write, gate and judge a new candidate against the line's head, filling in its step."""
        name = f"step-{step.index:02d}-{safe_name(move.label)}.cu"
        path = self.rec.write_source(name, cand)
        step.candidate_file, step.kernel_hash = name, self.rec.kernel(cand, "candidate", path)
        self._say(f"step {step.index}: {move.label}: gating {name} ({self.gated + 1}/{self.budget})")
        raw = gate(cand, self.workload, candidate_gate_options(self.gopts, _ms(self.line.gate)), name=name)
        self.rec.gate_run(cand, raw)
        self.gated += 1
        r = self._judged(cand, raw)
        v = judge(self.line.source, cand, self.line.gate, r, move.operator, self.target.bench)
        step.gated, step.accepted, step.category, step.message = True, r.accepted, r.category, r.message
        step.gate_key, step.time_ms, step.resources = r.artifact_id, _ms(r), _resources(r)
        step.verdict, step.reason, step.kept, step.detail = v.verdict, v.reason, v.kept, v.detail
        if r.timing is not None and raw.timing is None:
            step.detail["timed_by"] = r.timing.extra.get("measured")
        if r.profile.get("ncu"):
            step.detail["ncu"] = r.profile["ncu"]  # --ncu: the profiler's metrics of this candidate
        return r

    # ---- helpers --------------------------------------------------------------------------
    def _say(self, text: str) -> None:
        if self.opts.announce is not None:
            self.opts.announce(text)

    def _judged(self, text: str, r: GateResult) -> GateResult:
        """The gate's result with the measured GPU time where the gate itself timed nothing."""
        measured = self.opts.measured
        if r.timing is not None or measured is None or not r.accepted:
            return r
        t = measured.lookup(self.workload.name, text)
        if t is None:
            if (h := source_hash(text)) not in self.unmeasured:
                self.unmeasured.append(h)
            return r
        return dataclasses.replace(r, timing=t)

    def _limit(self, m: Move) -> int:
        return self.max_proposals if m.key == "free" else self.provider.attempts_per_move

    def _memo(self, m: Move) -> str:
        """What a move's attempts are counted by: the operator for a mechanical provider (every
        skill of one operator gives the same candidate), else the move itself."""
        return f"op:{m.operator.name}" if self.provider.mechanical and m.operator is not None else m.key

    def _result(self, status: str) -> MaterializeResult:
        ledger, best = self.provider.ledger, self.best
        return MaterializeResult(
            run_id=self.run_id,
            workload=self.workload.name,
            status=status,
            stop_reason=self.stop_reason,
            provider=self.provider.name,
            model=self.provider.model,
            skills_mode=self.opts.skills_mode,
            order=self.opts.order,
            backend=self.gopts.backend,
            budget=self.budget,
            gated=self.gated,
            start_gate=self.start_gate.to_dict(),
            best_source=best.source,
            best_step=best.step,
            start_time_ms=_ms(self.start_timed),
            best_time_ms=_ms(best.gate),
            torch_time_ms=_torch_ms(best.gate) or _torch_ms(self.start_gate),
            applied=list(best.applied),
            steps=self.steps,
            skipped_at_start=self.skipped_at_start,
            cost=ledger.to_dict() if ledger is not None else None,
            out_dir=str(self.out_dir),
            elapsed_s=time.perf_counter() - self.t0,
            timed_by=self.timed_by,
            unmeasured=list(self.unmeasured),
            explore=self.opts.explore,
            explored=list(best.explored),
            canonical=list(self.canonical),
        )

    def _save(self, status: str) -> MaterializeResult:
        res = self._result(status)
        self.rec.write_trace(res.to_dict())
        return res
