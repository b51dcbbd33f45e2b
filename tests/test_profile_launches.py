"""How many launches of seconds the cuda profile stage pays for a very slow kernel (no GPU: the
device pieces are fakes that count launches). A naive start kernel of seconds a launch, and every
candidate a materializer makes from it, hold the one GPU the whole loop shares."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from klineage.gates.backend import GateOptions
from klineage.gates.cuda import profile_stage, sidestream, timing
from klineage.workload import load_workload

CHECK = Path(__file__).resolve().parent.parent / "benchmarks" / "kernels" / "gpu_check"


class _Lib:
    def marker(self, tag: int, stream: int) -> None:
        pass


class _Runner:
    """Counts launches; `device`, `library.marker`, `synchronize` as the profile stage uses them."""

    def __init__(self) -> None:
        self.launches = 0
        self.device = "fake"
        self.library = _Lib()

    def launch_async(self, values: Any, stream: int) -> None:
        self.launches += 1

    def synchronize(self) -> None:
        pass


class _Flush:
    def numel(self) -> int:
        return 1


class _Bench:
    def __init__(self, workload: Any, bindings: Any, device: Any) -> None:
        self.values: list[Any] = []
        self.pool = [{}]
        self.flush = _Flush()
        self.refills: list[int] = []

    def refill(self, i: int) -> None:
        self.refills.append(i)

    def breach(self) -> None:
        return None


class _Stream:
    cuda_stream = 0

    def __init__(self, device: Any = None) -> None:
        pass


@pytest.fixture
def fakes(monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    """A kernel of `launch_ms` a launch behind fake device pieces; records which checks ran."""
    seen: dict[str, Any] = {"launch_ms": 1500.0, "checks": []}

    def time_reps(step, before, stream, reps, trials, warmup):  # noqa: ANN001, ANN202
        for _ in range(warmup + reps * trials):
            step()
        return [[seen["launch_ms"]] * reps for _ in range(trials)]

    def trace_one(launch, marker, stream, settle_s=0.05, keep=None, before=None):  # noqa: ANN001, ANN202
        if before is not None:
            before()
        launch()
        seen["checks"].append("trace")
        return sidestream.WindowReport(traced=True, event_ms=seen["launch_ms"])

    def verify_after_timing(runner, bench, stream):  # noqa: ANN001, ANN202
        runner.launch_async(bench.values, 0)
        seen["checks"].append("verify")

    def check_timed_launch(bench):  # noqa: ANN001, ANN202
        seen["checks"].append("timed launch checked")

    def refill_verify_set(bench, stream):  # noqa: ANN001, ANN202
        seen["checks"].append("verify set")
        return {"fresh": True}

    def check_verify_set(bench, fresh):  # noqa: ANN001, ANN202
        assert fresh == {"fresh": True}
        seen["checks"].append("verify checked")

    monkeypatch.setattr(timing, "time_reps", time_reps)
    monkeypatch.setattr(timing, "Bench", _Bench)
    monkeypatch.setattr(timing, "verify_after_timing", verify_after_timing)
    monkeypatch.setattr(timing, "check_timed_launch", check_timed_launch)
    monkeypatch.setattr(timing, "refill_verify_set", refill_verify_set)
    monkeypatch.setattr(timing, "check_verify_set", check_verify_set)
    monkeypatch.setattr(sidestream, "trace_one", trace_one)
    monkeypatch.setattr(profile_stage.torch.cuda, "Stream", _Stream)
    monkeypatch.setattr(profile_stage.torch.cuda, "get_device_name", lambda d: "fake")
    return seen


_CEILINGS = {
    "device": "fake",
    "driver": "0",
    "copy_bytes_per_s": 4.0e12,
    "matmul_flops_per_s": {"fp32": 6.0e13},
}


def _profile(extra: dict[str, Any]) -> tuple[int, dict[str, Any]]:
    runner = _Runner()
    out = profile_stage.run_profile(
        runner,  # type: ignore[arg-type]
        load_workload(CHECK),
        GateOptions(backend="cuda", extra={"skip_reference": True, "sol_ceilings": _CEILINGS, **extra}),
    )
    assert out is not None and out.category == "ok", out
    return runner.launches, out.timing or {}


def test_a_very_slow_kernel_expected_so_is_launched_once(fakes: dict[str, Any]) -> None:
    """The one launch is traced, timed and checked: no verify launch, no second trace."""
    launches, tm = _profile({"expect_very_slow": True})
    assert launches == 1
    assert fakes["checks"] == ["trace", "timed launch checked"]
    assert tm["median_ms"] == pytest.approx(1500.0) and tm["extra"]["timing_rule"] == "very slow"
    assert tm["extra"]["launches_after_correctness"] == 1


def test_a_very_slow_kernel_not_expected_is_launched_twice(fakes: dict[str, Any]) -> None:
    """Its timed launch is checked in place; the trace is the only other launch (three before)."""
    launches, tm = _profile({})
    assert launches == 2
    assert fakes["checks"] == ["timed launch checked", "trace"]
    assert tm["extra"]["launches_after_correctness"] == 2


def test_a_fast_kernel_keeps_its_verify_launch_even_when_expected_slow(fakes: dict[str, Any]) -> None:
    """A wrong guess costs nothing in rigor: the trials, a verify launch on unseen values, and the
    first look's trace serves as the side-stream check."""
    fakes["launch_ms"] = 0.5
    launches, tm = _profile({"expect_very_slow": True})
    assert fakes["checks"] == ["trace", "verify"]
    plan_launches = tm["extra"]["launches_after_correctness"]
    assert launches == plan_launches and tm["extra"]["timing_rule"] == "default"
    fakes["checks"].clear()
    launches2, tm2 = _profile({})
    assert tm2["extra"]["launches_after_correctness"] == plan_launches == launches2


def test_a_fast_kernels_verify_launch_is_the_traced_one(fakes: dict[str, Any]) -> None:
    """Not expected slow: the launch on unseen values after timing is traced, so the side-stream
    check costs no launch of its own (it cost one more before), and the set is in place before
    the trace starts."""
    fakes["launch_ms"] = 0.5
    launches, tm = _profile({})
    assert fakes["checks"] == ["verify set", "trace", "verify checked"]
    assert launches == tm["extra"]["launches_after_correctness"]


def test_a_slow_kernels_first_look_is_its_estimate_and_warm_up(fakes: dict[str, Any]) -> None:
    """20 ms to 1 s a launch: no second launch to estimate and no warm-up launch after the first
    look (two launches of a 350 ms attention kernel each gate paid before), then the trials and
    the one traced verify launch."""
    fakes["launch_ms"] = 350.0
    launches, tm = _profile({})
    assert tm["extra"]["timing_rule"] == "slow"
    trials, reps = tm["trials"], tm["reps_per_trial"]
    assert launches == 1 + trials * reps + 1 == tm["extra"]["launches_after_correctness"]
    assert fakes["checks"] == ["verify set", "trace", "verify checked"]
