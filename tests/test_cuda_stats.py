"""Timing statistics of the cuda backend (pure; no GPU)."""

import math

import pytest

from klineage.gates.cuda.stats import (
    SLOW_BUDGET_S,
    SLOW_MS,
    VERY_SLOW_MS,
    median,
    plan_reps,
    plan_timing,
    speedup,
    summarize,
)


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


def test_timing_rule_leaves_fast_kernels_alone() -> None:
    for est in (0.001, 0.5, SLOW_MS * 0.99):
        p = plan_timing(est, 50, 3, 5, 30.0)
        assert (p.reps, p.trials, p.warmup, p.reduced, p.rule) == (50, 3, 5, False, "default")


@pytest.mark.parametrize("est", [SLOW_MS, 23.2, 26.8, 100.0, 345.9, 999.0])
def test_timing_rule_gives_slow_kernels_a_small_budget(est: float) -> None:
    """The naive start kernels the materializer meets (23-346 ms a launch on the H200) hold the
    GPU about SLOW_BUDGET_S per timed callable, not 10-30 s; never fewer than one repetition."""
    p = plan_timing(est, 50, 3, 5, 30.0)
    assert p.rule == "slow" and p.trials == 3 and p.warmup == 0 and p.reps >= 1  # the first look warmed it
    launches = p.reps * p.trials + p.warmup
    assert p.reps == 1 or 2 * est * p.reps * p.trials <= SLOW_BUDGET_S * 1000
    assert launches * est <= max(SLOW_BUDGET_S * 1000, 4 * est)
    assert p.reps <= plan_reps(est, 50, 3, 30.0)[0]  # never more than the old rule


def test_timing_rule_very_slow_is_one_launch() -> None:
    p = plan_timing(VERY_SLOW_MS * 7.5, 50, 3, 5, 30.0)
    assert (p.reps, p.trials, p.warmup, p.rule) == (1, 1, 0, "very slow")


def test_timing_rule_thresholds_can_be_moved() -> None:
    assert plan_timing(30.0, 50, 3, 5, 30.0, slow_ms=50.0).rule == "default"
    assert plan_timing(30.0, 50, 3, 5, 30.0, slow_budget_s=60.0).reps == 50


@pytest.mark.parametrize(("launch_ms", "timed_calls"), [(1500.0, 1), (0.2, 3), (50.0, 2)])
def test_a_very_slow_kernel_is_launched_for_its_estimate_only(
    monkeypatch: pytest.MonkeyPatch, launch_ms: float, timed_calls: int
) -> None:
    """The very slow rule's one repetition is the first timed launch: no warm-up, estimate and
    repetition of seconds each. A slow kernel's first look is its estimate (then the trials);
    only a fast kernel gets a second launch to estimate from."""
    from klineage.gates.cuda import timing

    calls: list[tuple[int, int, int]] = []

    def fake_time_reps(step, before, stream, reps, trials, warmup):  # noqa: ANN001, ANN202
        calls.append((reps, trials, warmup))
        return [[launch_ms] * reps for _ in range(trials)]

    monkeypatch.setattr(timing, "time_reps", fake_time_reps)
    t = timing.timed(lambda: None, lambda i: None, stream=None)  # type: ignore[arg-type]
    assert len(calls) == timed_calls
    assert t.summary.median_ms == pytest.approx(launch_ms)
    assert t.estimate_ms == pytest.approx(launch_ms)


def test_a_first_look_taken_by_the_caller_is_not_launched_again(monkeypatch: pytest.MonkeyPatch) -> None:
    """The profile stage may take the first look itself (under the CUPTI trace): a very slow
    kernel then gets no launch from `timed` at all."""
    from klineage.gates.cuda import timing

    calls: list[int] = []

    def fake_time_reps(step, before, stream, reps, trials, warmup):  # noqa: ANN001, ANN202
        calls.append(reps)
        return [[0.5] * reps for _ in range(trials)]

    monkeypatch.setattr(timing, "time_reps", fake_time_reps)
    t = timing.timed(lambda: None, lambda i: None, stream=None, first_ms=2000.0)  # type: ignore[arg-type]
    assert calls == [] and t.summary.median_ms == 2000.0 and t.plan is not None and t.plan.rule == "very slow"
    t = timing.timed(lambda: None, lambda i: None, stream=None, first_ms=0.5)  # type: ignore[arg-type]
    assert len(calls) == 2  # the estimate, then the trials: the first look is not repeated
