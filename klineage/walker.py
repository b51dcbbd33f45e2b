"""The backward walker (DESIGN.md, 'Walker, lineage, skills').

One walk engine, a search with a frontier of width N (`WalkConfig.beam`; N = 1 is the greedy
walk): from an expert kernel it tries the operators' sites in the soft removal order, gates each
simplification, and moves to the first accepted one (N of them); it repeats until no
simplification passes or the step budget ends. Rejected attempts are kept: they are the evidence
of what breaks. The accepted steps of the path from the expert to the root are re-derived forward
(roundtrip). Each expanded state's attempts commit in one transaction (`_expand`: the one place
where steps are gated and recorded), and a re-run resumes from the store: a step already
recorded is never gated again.

Several walkers may run at once in threads of one driver (`klineage mine`), sharing the store and
the executor; a walk reads and writes only its own workload's rows, so its rows do not depend on
what the others do. A kernel or gate verdict two workloads share is attributed to the workload
whose name sorts first, whichever walk records it first. `stop` (an event) ends a walk at its next
gate verdict or step, before anything more is committed.

`WalkConfig.beam` > 1 makes the walk a beam search (`klineage mine --beam N`), for lineages whose
removal order matters: at each depth every state of the frontier (at most N states) gates its
simplifications in the soft removal order until N of them pass (the greedy walk stops at the
first); the next frontier is the first N distinct new states, in the order of the frontier state
they came from and then the soft removal order, so the search is deterministic. A simplification
that gives back a state already reached at the same or a smaller depth is refused as a revisit
(never gated), so the recorded steps form a DAG; a state reached from two frontier states at the
same depth is one state with two incoming steps (different orders merge). The walk stops when no
frontier state has a passing simplification or after `max_steps` depths. Every accepted step and
every rejected attempt is recorded, each from-state's attempts in one transaction, and every
accepted successor gets a states row at its smallest depth. The lineage's **root** is the
simplest state reached: the deepest state, and among those of that depth the first in beam order
(the first state of the last frontier). The steps of one path from the expert to the root are
marked `taken` (each state's path goes through the frontier state that first reached it): skills
are extracted from them as from a greedy walk, and only they are re-derived forward (roundtrip),
in a last transaction after the search. With N = 1 the frontier is one state and the walk is the
greedy one; when none of its simplifications passes, an LLM operator (`WalkConfig.llm`, greedy
walk only) is asked for one.
"""

from __future__ import annotations

import hashlib
import json
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from klineage.deopt.base import Operator, Refused, Site
from klineage.deopt.llm_operator import LLMOperator
from klineage.deopt.registry import operators as all_operators
from klineage.errors import KLineageError, SourceError
from klineage.executor import GateExecutor, GateJob, LocalExecutor
from klineage.gates.backend import GateOptions
from klineage.gates.result import GateResult
from klineage.source.canon import CANON_STEP, canonical_form
from klineage.source.digest import source_hash
from klineage.source.model import CudaSource
from klineage.source.reach import dead_edit
from klineage.source.text import normalize
from klineage.store import lineage as rows
from klineage.store.db import Store
from klineage.workload import Workload, load_workload


@dataclass
class WalkConfig:
    options: GateOptions = field(default_factory=GateOptions)
    max_steps: int = 48
    workers: int = 2
    operators: Sequence[Operator] | None = None
    roundtrip: bool = True
    #: asked for one open-vocabulary removal when no rule operator's simplification passes
    llm: LLMOperator | None = None
    llm_attempts: int = 2
    #: states kept per depth: 1 is the greedy walk, N > 1 the beam search (module docstring)
    beam: int = 1


@dataclass
class Attempt:
    step_id: str
    operator: str
    site: Site
    category: str
    message: str
    accepted: bool
    to_text: str | None = None
    result: GateResult | None = None
    #: the recorded verdict's gate key (beam walk: a step recorded by an earlier run is not gated again)
    gate_key: str | None = None


@dataclass
class WalkSummary:
    workload: str
    states: int = 0
    accepted: int = 0
    rejected: int = 0
    refused: int = 0
    gate_runs: int = 0
    cached_gates: int = 0
    skipped: str = ""
    elapsed_s: float = 0.0
    #: depth of the lineage's root (backward steps from the expert)
    depth: int = 0


Progress = Callable[[str], None]

#: one LLM request at a time across concurrent walks: the provider's cost ledger and its recorder
#: are shared
_LLM_LOCK = threading.Lock()


class WalkInterrupted(Exception):
    """The walk was asked to stop (the driver got Ctrl-C); the step in flight is not committed."""


def find_workloads(dirs: Sequence[Path]) -> list[Path]:
    """Workload folders (workload.py + expert.cu) in or under the given directories."""
    found: list[Path] = []
    for d in dirs:
        if not d.is_dir():
            raise KLineageError(f"{d}: not a directory")
        if (d / "workload.py").is_file() and (d / "expert.cu").is_file():
            found.append(d)
            continue
        found += sorted(p.parent for p in d.glob("*/workload.py") if (p.parent / "expert.cu").is_file())
    if not found:
        raise KLineageError(
            f"no workloads (folders with workload.py and expert.cu) in {', '.join(map(str, dirs))}"
        )
    return found


def step_id(workload: str, state: str, op: str, site: Site) -> str:
    key = json.dumps([workload, state, op, site.anchor.path, site.anchor.fingerprint, site.summary])
    return hashlib.sha256(key.encode()).hexdigest()[:20]


class Walker:
    def __init__(
        self,
        store: Store,
        config: WalkConfig,
        progress: Progress | None = None,
        executor: GateExecutor | None = None,
        stop: threading.Event | None = None,
    ) -> None:
        self.store = store
        self.config = config
        self.ops = list(config.operators) if config.operators is not None else all_operators()
        self.progress = progress or (lambda _msg: None)
        self._owns_executor = executor is None
        self.executor = executor if executor is not None else LocalExecutor(config.workers)
        self.stop = stop

    def _check_stop(self) -> None:
        if self.stop is not None and self.stop.is_set():
            raise WalkInterrupted("stopped")

    # ---- recording --------------------------------------------------------------------------
    def _record_kernel(self, con: Any, wl: Workload, text: str, role: str, path: str | None) -> str:
        h = source_hash(text)
        rows.record_kernel(con, h, wl.name, role, path, text)
        return h

    def _record_gate(self, con: Any, wl: Workload, text: str, r: GateResult) -> None:
        device = (r.profile or {}).get("device") or ("cpu-emulator" if r.backend == "emu" else r.backend)
        rows.record_gate_run(con, source_hash(text), wl.name, r, device)

    @staticmethod
    def _step_row(wl: Workload, state: str, a: Attempt, gate_key: str | None) -> rows.StepRow:
        return rows.StepRow(
            a.step_id,
            wl.name,
            state,
            source_hash(a.to_text) if a.to_text else None,
            a.operator,
            a.site.to_dict(),
            a.accepted,
            a.category,
            a.message,
            gate_key,
        )

    def _job(self, wl: Workload, text: str, name: str) -> GateJob:
        if wl.source_dir is None:
            raise KLineageError(
                f"workload '{wl.name}' has no folder: the gate's child process loads it from workload.py"
            )
        return GateJob(text, wl.source_dir, self.config.options, name)

    def _gate(self, wl: Workload, text: str, name: str) -> GateResult:
        self._check_stop()
        result = self.executor.gate_one(self._job(wl, text, name))
        self._check_stop()  # a verdict that came back after the stop (its child may have got SIGINT too)
        return result

    # ---- the walk ---------------------------------------------------------------------------
    def walk(self, folder: Path) -> WalkSummary:
        try:
            with self.executor.walking():
                return self._walk(folder)
        finally:
            if self._owns_executor:
                self.executor.close()

    def _walk(self, folder: Path) -> WalkSummary:
        t0 = time.perf_counter()
        wl = load_workload(folder)
        summary = WalkSummary(wl.name)
        expert_path = folder / "expert.cu"
        expert_text = expert_path.read_text()
        self.progress(f"{wl.name}: gating the expert")
        expert_gate = self._gate(wl, expert_text, str(expert_path))
        summary.gate_runs += 1
        summary.cached_gates += int(expert_gate.cached)
        with self.store.transaction() as con:
            self._record_kernel(con, wl, expert_text, "expert", str(expert_path))
            self._record_gate(con, wl, expert_text, expert_gate)
            naive = folder / "naive.cu"
            if naive.is_file():
                self._record_kernel(con, wl, naive.read_text(), "naive", str(naive))
        if not expert_gate.accepted:
            summary.skipped = f"expert fails its own gate: {expert_gate.category}: {expert_gate.message}"
            summary.elapsed_s = time.perf_counter() - t0
            return summary
        with self.store.transaction() as con:
            rows.add_expert_state(con, wl.name, source_hash(expert_text), expert_gate.artifact_id)
        start_text, start = self._canonical(wl, expert_text, summary)
        self._search(wl, start_text, summary, start)
        summary.elapsed_s = time.perf_counter() - t0
        return summary

    def _canonical(self, wl: Workload, expert_text: str, summary: WalkSummary) -> tuple[str, int]:
        """The lineage's state 0 past the expert: its canonical form (klineage.source.canon),
        gated like any step and recorded as the taken step expert -> canonical under the operator
        CANON_STEP (never a skill, no roundtrip). Returns (text, depth) the walk starts from: the
        canonical form at depth 1, or the expert at depth 0 when the rules change nothing or the
        gate rejects their result (that attempt is recorded too)."""
        expert = source_hash(expert_text)
        try:
            canon = canonical_form(CudaSource.from_text(expert_text, f"{wl.name}/expert.cu"))
        except SourceError:
            return expert_text, 0
        if not canon.changed:
            return expert_text, 0
        text = canon.source.text
        rules = ",".join(dict.fromkeys(canon.applied))
        site = Site(
            CANON_STEP,
            canon.source.anchor(canon.source.tree.root_node),
            0,
            len(canon.source.text_bytes),
            "canonical form: " + ", ".join(dict.fromkeys(canon.applied)),
            (("kind", "canonical"), ("rules", rules)),
        )
        a = Attempt(step_id(wl.name, expert, CANON_STEP, site), CANON_STEP, site, "pending", "", False, text)
        a.result = self._gate(wl, text, f"{wl.name}/{CANON_STEP}.cu")
        summary.gate_runs += 1
        summary.cached_gates += int(a.result.cached)
        a.accepted, a.category, a.message = a.result.accepted, a.result.category, a.result.message
        rt = {"ok": None, "message": "canonical form: recorded, never a skill", "kind": "canonical"}
        mark = rows.PathMark(None, rt, carrier_diff(text, expert_text), []) if a.accepted else None
        with self.store.transaction() as con:
            self._record_kernel(con, wl, text, "state", None)
            self._record_gate(con, wl, text, a.result)
            rows.add_step(con, self._step_row(wl, expert, a, a.result.artifact_id), mark)
            if a.accepted:
                rows.add_state(con, wl.name, source_hash(text), 1, a.result.artifact_id)
        if not a.accepted:
            summary.rejected += 1
            self.progress(f"{wl.name}: canonical form rejected ({a.category}); walking from the expert")
            return expert_text, 0
        self.progress(f"{wl.name}: canonical form ({site.summary})")
        return text, 1

    def _candidates(self, wl: Workload, src: CudaSource, state: str) -> list[Attempt]:
        out: list[Attempt] = []
        for op in self.ops:
            try:
                sites = op.find(src)
            except Exception as e:  # an operator bug must not end the walk; it is reported
                self.progress(f"{wl.name}: {op.name}.find failed: {type(e).__name__}: {e}")
                continue
            for site in sites:
                sid = step_id(wl.name, state, op.name, site)
                try:
                    new = op.remove(src, site)
                    if dead := dead_edit(src, new):  # a step in code that never runs: no step
                        why = f"{op.name}: the edit changes only {', '.join(dead)}, which nothing calls"
                        out.append(Attempt(sid, op.name, site, "refused", why, False))
                        continue
                    out.append(Attempt(sid, op.name, site, "pending", "", False, new.text))
                except (Refused, SourceError) as e:
                    out.append(Attempt(sid, op.name, site, "refused", str(e), False))
                except Exception as e:  # an operator bug: recorded as a refusal naming the error
                    out.append(
                        Attempt(
                            sid, op.name, site, "refused", f"operator error: {type(e).__name__}: {e}", False
                        )
                    )
        return out

    def _recall(
        self, wl: Workload, state: str, attempts: list[Attempt], revisit: Callable[[str], bool]
    ) -> None:
        """Refuse the candidates that give back a state `revisit` names (never gated); give the
        others already recorded from this state their recorded verdict (never gated again)."""
        known = rows.recorded_verdicts(self.store, wl.name, state)
        for a in attempts:
            if a.to_text is not None and revisit(source_hash(a.to_text)):
                a.category, a.message = "refused", "revisits an earlier state of this lineage"
                a.to_text = None
            elif a.step_id in known and a.to_text is not None:
                row = known[a.step_id]
                a.category, a.message, a.accepted = row["category"], row["message"], bool(row["accepted"])
                a.gate_key = row["gate_key"]

    def _ask_llm(
        self,
        wl: Workload,
        src: CudaSource,
        state: str,
        attempts: list[Attempt],
        revisit: Callable[[str], bool],
        summary: WalkSummary,
    ) -> Attempt | None:
        """When no rule applies: the LLM operator proposes one removal, gated like the rest; a
        rejection is fed back for the next attempt."""
        llm = self.config.llm
        assert llm is not None
        already = sorted({a.operator for a in attempts if a.accepted})
        feedback: str | None = None
        anchor_node = src.node_for(src.kernels[0]) if src.kernels else src.tree.root_node
        for i in range(self.config.llm_attempts):
            try:
                with _LLM_LOCK:
                    removal = llm.propose(src, wl.c_signature(), already, feedback)
            except Refused as e:
                site = Site("llm", src.anchor(anchor_node), 0, len(src.text_bytes), f"llm attempt {i + 1}")
                attempts.append(
                    Attempt(step_id(wl.name, state, f"llm#{i}", site), "llm", site, "refused", str(e), False)
                )
                feedback = str(e)
                continue
            site = Site(
                removal.operator,
                src.anchor(anchor_node),
                0,
                len(src.text_bytes),
                f"{removal.category} at {removal.locus}"[:200],
                (
                    ("category", removal.category),
                    ("intent", removal.intent),
                    ("locus", removal.locus),
                    ("exchange_id", removal.completion.exchange_id),
                ),
            )
            a = Attempt(
                step_id(wl.name, state, removal.operator + f"#{i}", site),
                removal.operator,
                site,
                "pending",
                "",
                False,
                removal.source,
            )
            attempts.append(a)
            if revisit(source_hash(removal.source)):
                a.category, a.message, a.to_text = (
                    "refused",
                    "revisits an earlier state of this lineage",
                    None,
                )
                feedback = "that simplification gives back a state this lineage already passed through"
                continue
            a.result = self._gate(wl, removal.source, f"{wl.name}/llm-{removal.category}.cu")
            a.accepted, a.category, a.message = a.result.accepted, a.result.category, a.result.message
            summary.gate_runs += 1
            if a.accepted:
                return a
            feedback = f"{a.category}: {a.message}"
        return None

    # ---- the search: a frontier of `beam` states per depth (1: greedy; the module docstring) ----
    def _search(self, wl: Workload, expert_text: str, summary: WalkSummary, start: int = 0) -> None:
        """Expand the frontier depth by depth until no state of it has a passing simplification
        or `max_steps` depths are walked; then mark the path from the start (the expert, or its
        canonical form at depth 1) to the root."""
        width = self.config.beam
        expert = source_hash(expert_text)
        depth_of = {expert: start}  # every state reached, at its smallest depth
        text_of = {expert: expert_text}
        parent: dict[str, tuple[str, Attempt]] = {}  # state -> the step that first reached it, in beam order
        frontier, depth = [expert], start
        while depth - start < self.config.max_steps:
            found: list[str] = []
            for state in frontier:
                for a in self._expand(wl, text_of[state], depth, depth_of, summary):
                    h = source_hash(a.to_text or "")
                    if h not in depth_of:
                        depth_of[h], text_of[h], parent[h] = depth + 1, a.to_text or "", (state, a)
                        found.append(h)
            if not found:
                self.progress(f"{wl.name}: no simplification passes at depth {depth} (beam {width})")
                break
            frontier, depth = found[:width], depth + 1
            self.progress(f"{wl.name}: depth {depth}: {len(found)} new states, {len(frontier)} kept")
        path: list[tuple[str, Attempt]] = []
        node = frontier[0]  # the root: the first state of the deepest frontier
        while node in parent:
            path.append(parent[node])
            node = parent[node][0]
        path.reverse()
        self._mark_path(wl, path, text_of)
        summary.states = len(depth_of)
        summary.depth = depth

    def _expand(
        self, wl: Workload, text: str, depth: int, depth_of: dict[str, int], summary: WalkSummary
    ) -> list[Attempt]:
        """Gate one frontier state's simplifications in soft removal order until `beam` pass (the
        greedy walk with an LLM operator asks it when none does); record them (and the rejections
        before the last) in one transaction; return the accepted."""
        self._check_stop()
        state = source_hash(text)
        src = CudaSource.from_text(text, f"{wl.name}/state-{depth}.cu")
        attempts = self._candidates(wl, src, state)

        def revisit(h: str) -> bool:  # a state reached at this depth or before
            return depth_of.get(h, depth + 1) <= depth

        self._recall(wl, state, attempts, revisit)
        accepted = self._gate_until(wl, attempts, self.config.beam, summary)
        if not accepted and self.config.llm is not None and self.config.beam == 1:
            chosen = self._ask_llm(wl, src, state, attempts, revisit, summary)
            accepted = [chosen] if chosen is not None else []
        self._check_stop()
        with self.store.transaction() as con:
            for a in attempts:
                if a.category == "pending":
                    continue
                if a.result is not None and a.to_text is not None:
                    self._record_kernel(con, wl, a.to_text, "state", None)
                    self._record_gate(con, wl, a.to_text, a.result)
                # already recorded (resume): kept as it is; the path's marks come last
                rows.add_step(
                    con,
                    self._step_row(wl, state, a, a.result.artifact_id if a.result else a.gate_key),
                    keep_existing=True,
                )
            for a in accepted:
                rows.add_state(
                    con,
                    wl.name,
                    source_hash(a.to_text or ""),
                    depth + 1,
                    a.result.artifact_id if a.result else a.gate_key,
                    smallest_depth=True,
                )
        summary.refused += sum(a.category == "refused" for a in attempts)
        summary.rejected += sum(a.category not in ("refused", "pending", "ok") for a in attempts)
        summary.accepted += len(accepted)
        return accepted

    def _gate_until(
        self, wl: Workload, attempts: list[Attempt], want: int, summary: WalkSummary
    ) -> list[Attempt]:
        """The first `want` accepted attempts in source order. Recorded verdicts are used as they
        are; the pending candidates are gated through the executor, consuming verdicts as they
        complete, and only those up to the last of the `want` get their verdict (the rows do not
        depend on how many ran at once: later candidates stay 'pending', unrecorded)."""
        pending = [a for a in attempts if a.category == "pending"]
        index = {id(a): j for j, a in enumerate(pending)}
        verdicts: dict[int, GateResult] = {}
        accepted: list[Attempt] = []
        pos = 0

        def settle() -> bool:  # advance over decided attempts; True once `want` passed or none is left
            nonlocal pos
            while pos < len(attempts):
                a = attempts[pos]
                if a.category == "pending":
                    j = index[id(a)]
                    if j not in verdicts:
                        return False
                    r = verdicts[j]
                    a.result, a.accepted, a.category, a.message = r, r.accepted, r.category, r.message
                    summary.gate_runs += 1
                    summary.cached_gates += int(r.cached)
                pos += 1
                if a.accepted and a.to_text is not None:
                    accepted.append(a)
                    if len(accepted) == want:
                        return True
            return True

        if settle():  # the recorded verdicts suffice: nothing is gated
            return accepted
        jobs = [self._job(wl, a.to_text or "", f"{wl.name}/{a.operator}@{a.site.line}.cu") for a in pending]
        stream = self.executor.run(jobs)
        try:
            for i, r in stream:
                self._check_stop()
                verdicts[i] = r
                if settle():
                    break
        finally:
            stream.close()
        return accepted

    def _mark_path(self, wl: Workload, path: list[tuple[str, Attempt]], text_of: dict[str, str]) -> None:
        """Roundtrip the steps from the expert to the root and mark them `taken` (with carrier and
        preconditions), unmarking any other step of this workload, in one transaction. A path step
        already marked with its roundtrip (a re-run) is not re-derived."""
        done = {
            sid: r for sid, r in rows.taken_marks(self.store, wl.name).items() if r["operator"] != CANON_STEP
        }
        marks: list[tuple[str, rows.PathMark]] = []
        for depth, (state, a) in enumerate(path):
            row = done.get(a.step_id)
            if row is not None and row["roundtrip"] is not None:
                marks.append(
                    (
                        a.step_id,
                        rows.PathMark(
                            row["roundtrip_ok"], row["roundtrip"], row["carrier"], row["preconditions"] or []
                        ),
                    )
                )
                continue
            self._check_stop()
            src = CudaSource.from_text(text_of[state], f"{wl.name}/state-{depth}.cu")
            rt = (
                self._roundtrip(wl, src, a)
                if self.config.roundtrip
                else {
                    "ok": None,
                    "message": "roundtrip not run (--no-roundtrip)",
                    "preconditions": self._facts(src, a),
                }
            )
            marks.append(
                (
                    a.step_id,
                    rows.PathMark(
                        rt.get("ok"),
                        rt,
                        carrier_diff(a.to_text or "", text_of[state]),
                        rt.get("preconditions", []),
                    ),
                )
            )
        self._check_stop()
        on_path = {m[0] for m in marks}
        rows.mark_path(self.store, sorted(set(done) - on_path), marks)

    def _facts(self, before: CudaSource, step: Attempt) -> list[dict[str, Any]]:
        """The static facts that made the optimization valid, recorded in the skill: at the forward
        site in the simpler state (same function as the step) when the operator has one, else at
        the backward site in the optimized state. Static analysis only; never gated."""
        op = next((o for o in self.ops if o.name == step.operator), None)
        if op is None or step.to_text is None:
            return []
        try:
            simpler = CudaSource.from_text(step.to_text, before.path)
            forward = op.find_forward(simpler)
            site = next(
                (f for f in forward if f.anchor.function == step.site.anchor.function),
                forward[0] if forward else None,
            )
            if site is not None:
                return [f.to_dict() for f in op.preconditions(simpler, site)]
            facts = op.removal_preconditions(before, step.site) + op.preconditions(before, step.site)
            return [f.to_dict() for f in facts]
        except Exception:  # facts are evidence, not a gate: an operator that cannot state them records none
            return []

    def _roundtrip(self, wl: Workload, before: CudaSource, step: Attempt) -> dict[str, Any]:
        """Re-derive the optimization forward on the simplified state: apply must pass the gate
        and restore the optimization (the operator finds it again)."""
        if step.operator.startswith("llm"):
            return {
                "ok": None,
                "message": "LLM step: forward re-derivation asks the provider again; not done in this walk",
                "preconditions": [],
            }
        op = next(o for o in self.ops if o.name == step.operator)
        assert step.to_text is not None
        try:
            simpler = CudaSource.from_text(step.to_text, f"{wl.name}/simpler.cu")
        except SourceError as e:
            return {"ok": False, "message": str(e)}
        forward = op.find_forward(simpler)
        facts: list[dict[str, Any]] = []
        if not forward:
            return {
                "ok": None,
                "message": f"{op.name}: no mechanical forward site (an LLM provider must re-derive it)",
                "preconditions": self._facts(before, step),
            }
        target = normalize(before.text)
        best: dict[str, Any] | None = None
        here = step.site.anchor.function
        forward.sort(key=lambda s: s.anchor.function != here)  # the step's own function first (stable)
        for site in forward:
            facts = [f.to_dict() for f in op.preconditions(simpler, site)]
            try:
                again = op.apply(simpler, site)
            except (Refused, SourceError) as e:
                best = best or {"ok": False, "message": f"apply refused: {e}", "preconditions": facts}
                continue
            if normalize(again.text) == target:
                return {
                    "ok": True,
                    "message": "apply(remove(x)) == x after normalization",
                    "preconditions": facts,
                    "forward_site": site.to_dict(),
                }
            r = self._gate(wl, again.text, f"{wl.name}/roundtrip-{op.name}.cu")
            present = restored_at(op, simpler, again, here)
            if r.accepted and present:
                return {
                    "ok": True,
                    "message": "apply passes the gate and the optimization is present again",
                    "preconditions": facts,
                    "gate_key": r.artifact_id,
                    "forward_site": site.to_dict(),
                }
            best = {
                "ok": False,
                "message": f"apply gave {r.category}: {r.message}"
                if not r.accepted
                else f"apply passed but the optimization was not found again in {here or 'the file scope'}",
                "preconditions": facts,
            }
        return best or {"ok": False, "message": "no forward site could be applied", "preconditions": facts}


def restored_at(op: Operator, simpler: CudaSource, again: CudaSource, function: str) -> bool:
    """Whether the forward step put the optimization back where the backward step took it out: the
    operator finds more of its sites in `function` (the removed site's function) than before. A
    site gained in another function (a `#pragma unroll` added to a different kernel) is not a
    roundtrip of this step."""

    def count(src: CudaSource) -> int:
        return sum(1 for s in op.find(src) if s.anchor.function == function)

    return count(again) > count(simpler)


def carrier_diff(
    simpler: str,
    optimized: str,
    context: int = 2,
    max_lines: int = 60,
    max_run: int | None = 12,
    run_ends: int = 4,
) -> str:
    """A minimal unified diff from the simplified state to the optimized one (the skill's
    carrier): the changed hunks only, never the whole kernel. A run of more than `max_run` added
    lines shows its first and last `run_ends` lines around a count (a structural step that brings
    back a whole code path would otherwise put that path on the card), then the diff is capped at
    `max_lines`."""
    import difflib

    lines = list(
        difflib.unified_diff(
            simpler.splitlines(), optimized.splitlines(), "before.cu", "after.cu", n=context, lineterm=""
        )
    )
    if max_run is not None:
        lines = _elide_added_runs(lines, max_run, run_ends)
    if len(lines) > max_lines:
        lines = lines[:max_lines] + [f"... ({len(lines) - max_lines} more diff lines)"]
    return "\n".join(lines)


def _elide_added_runs(lines: list[str], max_run: int, ends: int) -> list[str]:
    out: list[str] = []
    run: list[str] = []

    def flush() -> None:
        if len(run) > max_run:
            indent = run[ends][1:][: len(run[ends][1:]) - len(run[ends][1:].lstrip())]
            out.extend(
                [*run[:ends], f"+{indent}// ... ({len(run) - 2 * ends} more added lines)", *run[-ends:]]
            )
        else:
            out.extend(run)
        run.clear()

    for line in lines:
        if line.startswith("+") and not line.startswith("+++"):
            run.append(line)
        else:
            flush()
            out.append(line)
    flush()
    return out
