"""The lines of kernels the optimize loop extends, and the tournament that forks them.

A line is a head kernel (with its gate result and any measured time) and what was tried on it.
A tournament gates alternative moves on one head: the first kept candidate holds unless a later
one is faster by more than the timing spread; the others are `outpaced` and become lines of their
own, which the loop goes back to when the leading line runs dry (DESIGN.md, 'Materializer').
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from klineage.deopt.registry import get_operator
from klineage.errors import KLineageError
from klineage.gates.result import GateResult
from klineage.materialize.judge import gain_and_spread
from klineage.source.digest import source_hash

if TYPE_CHECKING:
    from klineage.materialize.loop import StepRecord

#: operator categories whose steps are local rewrites: keeping one does not reopen moves not kept
LOCAL_CATEGORIES = frozenset({"tuning", "specialized_instruction"})


Tried = tuple[
    "StepRecord", str | None, GateResult | None
]  # a gated (or refused) move: step, candidate, result
Kept = tuple["StepRecord", str, GateResult]


@dataclass
class Line:
    """A line of kernels the loop extends: its head, the head's gate result (with any measured
    time), and what was tried on the line. `extend` and `branch` return new heads; the record of
    what was tried is shared along one line."""

    source: str
    gate: GateResult
    file: str | None  # the head's candidate file (None: the start kernel)
    step: int | None  # the step that made the head (None: the start kernel)
    origin: int | None  # the step whose candidate began this line (None: the first line)
    applied: list[str]
    applied_ops: list[str]
    epoch: str  # the head's hash at the line's last structural step: a move not kept waits for the next
    tried: dict[str, int] = field(default_factory=dict)  # memo key -> outcome (see outcome)
    hints: dict[str, int] = field(
        default_factory=dict
    )  # the outcomes on the line this one was gone back from
    explored: list[str] = field(default_factory=list)  # its kept steps that came from exploration

    @classmethod
    def first(cls, source: str, gate: GateResult) -> Line:
        """The first line, headed by the start kernel (or its canonical form): no step made it."""
        return cls(source, gate, None, None, None, [], [], source_hash(source))

    def extend(self, step: StepRecord, cand: str, r: GateResult, *, structural: bool) -> Line:
        return dataclasses.replace(
            self,
            source=cand,
            gate=r,
            file=step.candidate_file,
            step=step.index,
            applied=self.applied + ([step.skill_id] if step.skill_id else []),
            applied_ops=self.applied_ops + ([step.operator] if step.operator else []),
            explored=self.explored + ([step.operator or step.move] if step.explored else []),
            epoch=source_hash(cand) if structural else self.epoch,
        )

    def branch(self, step: StepRecord, cand: str, r: GateResult) -> Line:
        """A new line from a tournament loser gated on this head."""
        new = self.extend(step, cand, r, structural=True)
        return dataclasses.replace(new, origin=step.index, tried={}, hints={})


def outcome(step: StepRecord) -> int:
    """0: the move paid (kept, or outpaced by an alternative); 2: correct but slower than the
    kernel it started from by more than the spread; 1: anything else (neutral, rejected, no candidate)."""
    if step.kept or step.verdict == "outpaced":
        return 0
    gain, spread = step.detail.get("gain_ms"), step.detail.get("spread_ms")
    if (
        step.verdict == "not_faster"
        and isinstance(gain, float)
        and isinstance(spread, float)
        and -gain > spread
    ):
        return 2
    return 1


def structural(operator: str | None) -> bool:
    """Whether keeping a step of `operator` changes how the work is laid out (unknown: yes)."""
    if operator is None:
        return True
    try:
        return get_operator(operator).category not in LOCAL_CATEGORIES
    except KLineageError:
        return True


def enabling(step: StepRecord, cand: str | None, r: GateResult | None) -> bool:
    """A correct, timed, structural candidate that was not faster than its head: worth a line of
    its own, since the steps it makes possible may pay where it alone did not (on the H200 a
    GEMM's shared-memory tiles alone were 6% slower than the naive loop, and 4x faster once
    register blocking was built on them). Local rewrites are not: nothing builds on them."""
    return (
        step.verdict == "not_faster"
        and cand is not None
        and r is not None
        and r.accepted
        and r.timing is not None
        and structural(step.operator)
    )


def go_back(parked: list[Line], leaving: Line) -> Line:
    """Take the fastest parked line (the first one parked when any lacks a time); it is ordered by
    the outcomes of the line being left."""
    timed = all(p.gate.timing is not None for p in parked)
    chosen = min(parked, key=lambda p: p.gate.timing.median_ms) if timed else parked[0]  # type: ignore[union-attr]
    parked.remove(chosen)
    chosen.hints = dict(leaving.tried)
    return chosen


def faster(a: GateResult, b: GateResult) -> bool:
    """`a` beats `b` by more than the larger of their timing spreads (False without both times)."""
    if a.timing is None or b.timing is None:
        return False
    gain, spread = gain_and_spread(b.timing, a.timing)
    return gain > spread


def hold_tournament(
    tried: list[Tried], group: bool, head_leads: bool, best: Line
) -> tuple[Kept | None, list[Kept]]:
    """The kept candidate of a group of moves gated on the same kernel, and the ones it outpaced;
    sets each step's best kernel after it. The first kept one holds unless a later one is faster by
    more than the spread; the others are `outpaced` (correct and better than the kernel they
    started from, not kept). A line behind the best leads only once it is faster than the best."""
    winner: Kept | None = None
    losers: list[Kept] = []
    for step, cand, r in tried:
        if step.kept and cand is not None and r is not None:
            if winner is None:
                winner = (step, cand, r)
            elif faster(r, winner[2]):
                _outpaced(winner[0], step, winner[2], r)
                losers.append(winner)
                winner = (step, cand, r)
            else:
                _outpaced(step, winner[0], r, winner[2])
                losers.append((step, cand, r))
        leading = winner is not None and (head_leads or faster(winner[2], best.gate))
        step.best_file = winner[0].candidate_file if winner is not None and leading else best.file
        if group:
            step.group = tried[0][0].index
    return winner, losers


def _outpaced(loser: StepRecord, by: StepRecord, lr: GateResult, br: GateResult) -> None:
    loser.kept, loser.verdict = False, "outpaced"
    times = (
        f": {lr.timing.median_ms:.4f} ms against {br.timing.median_ms:.4f} ms"
        if lr.timing is not None and br.timing is not None
        else " (no times: the first one holds)"
    )
    loser.reason = f"better than the kernel it started from, but {by.candidate_file} is faster{times}"
