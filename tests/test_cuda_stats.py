"""Timing statistics of the cuda backend (pure; no GPU)."""

import math

import pytest

from klineage.gates.cuda.stats import median, plan_reps, speedup, summarize


def test_median_odd_even():
    assert median([3.0, 1.0, 2.0]) == 2.0
    assert median([4.0, 1.0, 2.0, 3.0]) == 2.5
    with pytest.raises(ValueError):
        median([])


def test_median_of_trial_medians_and_spread():
    trials = [[1.0, 1.1, 5.0], [1.2, 1.3, 1.25], [0.9, 1.0, 1.05]]
    s = summarize(trials)
    assert s.trial_medians_ms == [1.1, 1.25, 1.0]
    assert s.median_ms == 1.1  # an outlier repetition (5.0) moves nothing
    assert s.min_ms == 0.9 and s.max_ms == 5.0
    assert s.trials == 3 and s.reps_per_trial == 3
    assert math.isclose(s.trial_spread, (1.25 - 1.0) / 1.1)


def test_summarize_rejects_broken_event_times():
    with pytest.raises(ValueError):
        summarize([[1.0, float("nan")]])
    with pytest.raises(ValueError):
        summarize([[1.0, -0.5]])
    with pytest.raises(ValueError):
        summarize([[], []])


def test_speedup():
    assert speedup(2.0, 1.0) == 2.0
    assert speedup(None, 1.0) is None
    assert speedup(1.0, 0.0) is None


def test_plan_reps_keeps_fast_kernels_and_caps_slow_ones():
    assert plan_reps(0.1, 50, 3, 30.0) == (50, False)
    reps, reduced = plan_reps(200.0, 50, 3, 30.0)  # 200 ms a launch: 50 reps x 3 take 60 s+
    assert reduced and 10 <= reps < 50
    assert plan_reps(10_000.0, 50, 3, 30.0) == (10, True)  # never below the floor
