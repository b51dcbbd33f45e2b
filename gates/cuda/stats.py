"""Timing statistics, pure Python so CI tests them without a GPU.

A trial is a list of per-repetition times (ms). The reported time is the median of the trial
medians (robust to a noisy trial and to outlier repetitions); the spread is the min and max over
every repetition and over the trial medians, so a reader can tell noise from a real difference.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field


def median(xs: Sequence[float]) -> float:
    """The median; the mean of the two middle values for an even count."""
    if not xs:
        raise ValueError("median of no values")
    s = sorted(xs)
    n = len(s)
    mid = n // 2
    return s[mid] if n % 2 else (s[mid - 1] + s[mid]) / 2.0


@dataclass
class Summary:
    """Statistics of one timed callable."""

    median_ms: float
    min_ms: float
    max_ms: float
    trial_medians_ms: list[float] = field(default_factory=list)
    trials: int = 0
    reps_per_trial: int = 0

    @property
    def trial_spread(self) -> float:
        """(max - min) of the trial medians over the median: run-to-run noise, as a fraction."""
        if not self.trial_medians_ms or self.median_ms <= 0:
            return 0.0
        return (max(self.trial_medians_ms) - min(self.trial_medians_ms)) / self.median_ms


def summarize(trials: Sequence[Sequence[float]]) -> Summary:
    """Median of trial medians, min/max over all repetitions. Rejects NaN and negative times,
    which only a broken event pair produces."""
    trials = [list(t) for t in trials if len(t)]
    if not trials:
        raise ValueError("no timed repetitions")
    for t in trials:
        for x in t:
            if not math.isfinite(x) or x < 0:
                raise ValueError(f"bad repetition time {x!r}")
    medians = [median(t) for t in trials]
    every = [x for t in trials for x in t]
    return Summary(
        median_ms=median(medians),
        min_ms=min(every),
        max_ms=max(every),
        trial_medians_ms=medians,
        trials=len(trials),
        reps_per_trial=min(len(t) for t in trials),
    )


def speedup(reference_ms: float | None, candidate_ms: float) -> float | None:
    """reference / candidate (above 1: the candidate is faster); None when undefined."""
    if reference_ms is None or candidate_ms <= 0 or not math.isfinite(reference_ms):
        return None
    return reference_ms / candidate_ms


def plan_reps(
    estimate_ms: float, reps: int, trials: int, budget_s: float, floor: int = 10
) -> tuple[int, bool]:
    """Repetitions per trial that fit `budget_s` for a kernel of about `estimate_ms` (with L2
    flush and refill overhead counted as the same again); never fewer than `floor`.
    Returns (reps, reduced)."""
    if estimate_ms <= 0:
        return reps, False
    affordable = int(budget_s * 1000.0 / (2.0 * estimate_ms * max(trials, 1)))
    if affordable >= reps:
        return reps, False
    return max(floor, affordable), True


#: a timed callable whose one-launch estimate reaches this is slow: fewer repetitions, and one
#: warm-up launch (launch noise is microseconds, a small fraction of such a launch)
SLOW_MS = 20.0
#: seconds of timed launches a slow callable gets in all, over its trials
SLOW_BUDGET_S = 2.0
#: at or above this a single timed launch after the estimate's (one trial, no more warm-up)
VERY_SLOW_MS = 1000.0


@dataclass(frozen=True)
class Plan:
    """How a callable is timed: trials of `reps` repetitions after `warmup` launches."""

    reps: int
    trials: int
    warmup: int
    reduced: bool
    rule: str  # "default", "budget" (the old cut for a long total), "slow" or "very slow"


def plan_timing(
    estimate_ms: float,
    reps: int,
    trials: int,
    warmup: int,
    budget_s: float,
    slow_ms: float = SLOW_MS,
    slow_budget_s: float = SLOW_BUDGET_S,
) -> Plan:
    """The timing rule (DESIGN.md, 'The gate', profile stage). Below `slow_ms` a launch: the
    requested trials, repetitions and warm-up (`plan_reps` may still cut repetitions to
    `budget_s`). From `slow_ms`: no warm-up (the first look, a launch of tens of milliseconds,
    was it; `timing.timed` takes it as the estimate too) and as many repetitions per trial (at
    least one) as fit `slow_budget_s` over the trials, counting the L2 flush and refill as a
    launch again. From
    `VERY_SLOW_MS`: one trial of one repetition. A materializer's loop over slow naive kernels
    then holds the GPU seconds per gate, not tens of seconds."""
    if estimate_ms < slow_ms:
        n, reduced = plan_reps(estimate_ms, reps, trials, budget_s)
        return Plan(n, trials, warmup, reduced, "budget" if reduced else "default")
    if estimate_ms >= VERY_SLOW_MS:
        return Plan(1, 1, 0, True, "very slow")
    fit = int(slow_budget_s * 1000.0 / (2.0 * estimate_ms * max(trials, 1)))
    n = max(1, min(reps, fit))
    return Plan(n, trials, 0, n < reps or warmup > 0, "slow")
