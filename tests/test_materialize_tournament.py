"""Alternatives and the tournament: skills that exclude each other are gated from the same kernel
when the judge has times, and the faster one is kept (materialize/alternatives.py, loop.py).

The gate is a stand-in (every candidate correct, no timing, as on the emulator) and the times are
measured elsewhere (a MeasuredTimes stand-in that times by what the code does), so these tests
pay for no build; the alternatives themselves are the real operators on the real rmsnorm kernel.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from klineage.deopt.registry import get_operator
from klineage.gates.result import Timing
from klineage.materialize import MaterializeOptions, Move, make_provider, materialize
from klineage.materialize.alternatives import alternatives
from klineage.materialize.command import _step_line
from klineage.materialize.judge import spread_ms
from klineage.materialize.measured import MeasuredTimes, read_measured
from klineage.source.digest import source_hash
from klineage.source.model import CudaSource
from klineage.workload import load_workload
from tests.conftest import REPO
from tests.test_materialize_helpers import make_skill

RMSNORM = REPO / "expert_kernels" / "rmsnorm"
NAIVE = (RMSNORM / "naive.cu").read_text()


def _skills(order: tuple[str, ...] = ("block_per_row", "warp_per_row", "restrict")) -> list:
    return [make_skill(op, depth, workload="other", dtypes=["bfloat16"]) for depth, op in enumerate(order, 1)]


def _move(op: str) -> Move:
    return Move(f"{op}-other", None, get_operator(op))


class ByCode(MeasuredTimes):
    """Times by what the code does: a warp per row 1.0 ms, a block per row 1.5 ms, one thread per row
    10 ms; __restrict__ takes 10% off. `missing`: texts containing it have no time."""

    def __init__(self, missing: str | None = None) -> None:
        super().__init__("NVIDIA H200", {}, ("stand-in.json",))
        object.__setattr__(self, "missing", missing)

    def lookup(self, workload: str, text: str) -> Timing | None:
        if self.missing is not None and self.missing in text:
            return None
        ms = 1.0 if "lane" in text else 1.5 if "blockDim.x)" in text else 10.0
        ms *= 0.9 if "__restrict__" in text else 1.0
        return Timing(
            ms,
            ms * 0.99,
            ms * 1.01,
            3,
            0,
            reference_median_ms=0.5,
            extra={"trial_medians_ms": [ms * 0.995, ms, ms * 1.005], "measured": "stand-in.json"},
        )


def test_a_warp_and_a_block_per_row_exclude_each_other() -> None:
    src = CudaSource.from_text(NAIVE, "naive.cu")
    alts = alternatives(src, _move("block_per_row"), [_move("restrict"), _move("warp_per_row"), _move("ldg")])
    assert [m.operator.name for m in alts] == ["warp_per_row"]
    assert [m.operator.name for m in alternatives(src, _move("warp_per_row"), [_move("block_per_row")])] == [
        "block_per_row"
    ]
    assert alternatives(src, _move("restrict"), [_move("block_per_row"), _move("warp_per_row")]) == []


def test_tournament_keeps_the_faster_alternative(cpu_gate: list[str], tmp_path: Path) -> None:
    wl = load_workload(RMSNORM)
    res = materialize(
        wl,
        NAIVE,
        _skills(),
        make_provider("offline"),
        3,
        MaterializeOptions(out_dir=tmp_path, measured=ByCode()),
    )
    verdicts = [(s.operator, s.verdict) for s in res.steps]
    assert verdicts == [("block_per_row", "outpaced"), ("warp_per_row", "kept"), ("restrict", "kept")]
    assert [s.group for s in res.steps] == [1, 1, None]
    # after step 1 the block kernel was the best; the warp kernel from step 2 on
    assert [s.best_file for s in res.steps] == [
        res.steps[0].candidate_file,
        res.steps[1].candidate_file,
        res.steps[2].candidate_file,
    ]
    assert "is faster: 1.5000 ms against 1.0000 ms" in res.steps[0].reason
    assert res.applied == ["warp_per_row-other", "restrict-other"] and res.unmeasured == []
    assert res.speedup == pytest.approx(10 / 0.9) and res.timed_by.startswith("measured on NVIDIA H200")
    assert res.steps[1].detail["timed_by"] == "stand-in.json"
    assert "lane" in (tmp_path / "best.cu").read_text()


class Timed(MeasuredTimes):
    """Times from a function of the code (every kernel has one; the spread is 1% of the median)."""

    def __init__(self, ms_of) -> None:  # noqa: ANN001
        super().__init__("NVIDIA H200", {}, ("stand-in.json",))
        object.__setattr__(self, "ms_of", ms_of)

    def lookup(self, workload: str, text: str) -> Timing | None:
        ms = self.ms_of(text)
        return Timing(
            ms,
            ms * 0.99,
            ms * 1.01,
            3,
            0,
            reference_median_ms=0.5,
            extra={"trial_medians_ms": [ms * 0.995, ms, ms * 1.005], "measured": "stand-in.json"},
        )


def _layout_ms(text: str) -> float:
    return 1.0 if "lane" in text else 1.5 if "blockDim.x)" in text else 10.0


def test_the_loop_goes_back_to_the_alternative_that_lost(cpu_gate: list[str], tmp_path: Path) -> None:
    """rmsnorm's case: a block per row beats a warp per row on the bare kernel, but with __restrict__
    the block kernel is the faster one by far. The warp line runs dry with budget left, the loop goes
    back to the block line, tries there first what paid on the warp line, and the block kernel ends
    up the best; each step's best kernel follows."""

    def ms(text: str) -> float:
        base = _layout_ms(text)
        return base * (0.3 if base == 1.5 else 0.9) if "__restrict__" in text else base

    wl = load_workload(RMSNORM)
    res = materialize(
        wl,
        NAIVE,
        _skills(("warp_per_row", "block_per_row", "restrict")),
        make_provider("offline"),
        10,
        MaterializeOptions(out_dir=tmp_path, measured=Timed(ms)),
    )
    assert [(s.operator, s.verdict, s.line) for s in res.steps] == [
        ("warp_per_row", "kept", None),
        ("block_per_row", "outpaced", None),
        ("restrict", "kept", None),
        ("restrict", "kept", 2),
    ]
    files = [s.candidate_file for s in res.steps]
    assert [s.best_file for s in res.steps] == [files[0], files[0], files[2], files[3]]
    assert res.best_step == 4 and res.applied == ["block_per_row-other", "restrict-other"]
    assert res.speedup == pytest.approx(10 / 0.45) and res.stop_reason == "no applicable skill left to try"
    assert "blockDim.x)" in res.best_source and "__restrict__" in res.best_source
    trace = json.loads((tmp_path / "trace.json").read_text())
    assert [s["line"] for s in trace["steps"]] == [None, None, None, 2]
    assert "restrict-other @2" in _step_line(res.steps[3]) and "@" not in _step_line(res.steps[2])


def test_a_line_gone_back_to_does_not_lead_unless_faster(cpu_gate: list[str], tmp_path: Path) -> None:
    """The block line's kernel with __restrict__ (1.35 ms) is better than the block kernel, so it is
    kept on its line, but the warp line's 0.9 ms stays the best."""
    wl = load_workload(RMSNORM)
    res = materialize(
        wl,
        NAIVE,
        _skills(),
        make_provider("offline"),
        10,
        MaterializeOptions(out_dir=tmp_path, measured=ByCode()),
    )
    assert [(s.operator, s.verdict, s.line) for s in res.steps] == [
        ("block_per_row", "outpaced", None),
        ("warp_per_row", "kept", None),
        ("restrict", "kept", None),
        ("restrict", "kept", 1),
    ]
    assert res.best_step == 3 and res.steps[3].best_file == res.steps[2].candidate_file
    assert res.speedup == pytest.approx(10 / 0.9) and "lane" in res.best_source


def test_a_move_not_kept_waits_for_a_structural_step(cpu_gate: list[str], tmp_path: Path) -> None:
    """__restrict__ pays only on a block per row. Not kept on the bare kernel, it is not gated again
    after __launch_bounds__ (a local step) but is after the block per row (a structural one)."""

    def ms(text: str) -> float:
        base = _layout_ms(text) * (0.9 if "__launch_bounds__" in text else 1.0)
        return base * 0.8 if "__restrict__" in text and "blockDim.x)" in text else base

    wl = load_workload(RMSNORM)
    res = materialize(
        wl,
        NAIVE,
        _skills(("restrict", "launch_bounds", "block_per_row")),
        make_provider("offline"),
        10,
        MaterializeOptions(out_dir=tmp_path, measured=Timed(ms)),
    )
    assert [(s.operator, s.verdict) for s in res.steps] == [
        ("restrict", "not_faster"),
        ("launch_bounds", "kept"),
        ("block_per_row", "kept"),
        ("restrict", "kept"),
    ]
    assert res.gated == 4 and "__restrict__" in res.best_source


def test_a_structural_step_that_pays_only_with_the_next_is_gone_back_to(
    cpu_gate: list[str], tmp_path: Path
) -> None:
    """An enabling step: a block per row alone is slower than the naive kernel here (12 ms against
    10), and __restrict__ pays only on it (3 ms). The block step is not kept, but its candidate is
    parked as a line; when the naive line runs dry the loop goes back to it, __restrict__ is kept
    there and that kernel becomes the best. A local step that is not faster is not parked."""

    def ms(text: str) -> float:
        if "blockDim.x)" in text:
            return 3.0 if "__restrict__" in text else 12.0
        return 10.0 * (1.02 if "__launch_bounds__" in text else 1.0)

    wl = load_workload(RMSNORM)
    res = materialize(
        wl,
        NAIVE,
        _skills(("block_per_row", "launch_bounds", "restrict")),
        make_provider("offline"),
        10,
        MaterializeOptions(out_dir=tmp_path, measured=Timed(ms)),
    )
    steps = [(s.operator, s.verdict, s.line) for s in res.steps]
    assert steps[:3] == [
        ("block_per_row", "not_faster", None),
        ("launch_bounds", "not_faster", None),
        ("restrict", "not_faster", None),
    ]
    assert ("restrict", "kept", 1) in steps[3:]
    assert all(line in (None, 1) for _, _, line in steps)  # no line from the local launch_bounds step
    assert "blockDim.x)" in res.best_source and "__restrict__" in res.best_source
    assert res.speedup == pytest.approx(10 / 3.0)
    assert res.applied[:2] == ["block_per_row-other", "restrict-other"]


def test_without_times_there_is_no_tournament(cpu_gate: list[str], tmp_path: Path) -> None:
    wl = load_workload(RMSNORM)
    res = materialize(wl, NAIVE, _skills(), make_provider("offline"), 5, MaterializeOptions(out_dir=tmp_path))
    assert [(s.operator, s.verdict) for s in res.steps] == [("block_per_row", "kept"), ("restrict", "kept")]
    assert res.timed_by is None and res.unmeasured == []


def test_a_candidate_without_a_time_is_judged_on_the_cpu_and_listed(
    cpu_gate: list[str], tmp_path: Path
) -> None:
    """The block kernel has no measured time: it is kept by its static effect, holds the tournament
    (nothing to compare by), and is listed for the next round to time."""
    wl = load_workload(RMSNORM)
    res = materialize(
        wl,
        NAIVE,
        _skills(("block_per_row", "warp_per_row")),
        make_provider("offline"),
        2,
        MaterializeOptions(out_dir=tmp_path, measured=ByCode(missing="blockDim.x)")),
    )
    assert [(s.operator, s.verdict) for s in res.steps] == [
        ("block_per_row", "kept"),
        ("warp_per_row", "outpaced"),
    ]
    assert "no times: the first one holds" in res.steps[1].reason
    assert res.unmeasured == [res.steps[0].kernel_hash] and res.best_step == 1


def test_the_budget_cuts_a_tournament(cpu_gate: list[str], tmp_path: Path) -> None:
    wl = load_workload(RMSNORM)
    res = materialize(
        wl,
        NAIVE,
        _skills(),
        make_provider("offline"),
        1,
        MaterializeOptions(out_dir=tmp_path, measured=ByCode()),
    )
    assert [(s.operator, s.verdict, s.best_file) for s in res.steps] == [
        ("block_per_row", "kept", res.steps[0].candidate_file)
    ]
    assert res.gated == 1 and "budget of 1" in res.stop_reason


def _bench_json(path: Path, device: str, kernels: dict[str, dict]) -> Path:
    path.write_text(
        json.dumps(
            {
                "date": "2026-12-03 05:00 UTC",
                "device": device,
                "rows": [
                    {
                        "name": "rmsnorm",
                        "bench": {"M": 16384, "N": 4096},
                        "torch_ms": 0.08,
                        "kernels": kernels,
                    }
                ],
            }
        )
    )
    return path


def test_read_measured_takes_checked_times_and_their_spread(tmp_path: Path) -> None:
    naive, other = NAIVE, NAIVE + "\n// other\n"
    first = _bench_json(
        tmp_path / "a.json",
        "NVIDIA H200",
        {
            source_hash(naive): {
                "check": "ok",
                "ms": 2.6,
                "trial_ms": [2.59, 2.6, 2.62],
                "min_ms": 2.5,
                "max_ms": 2.7,
            },
            source_hash(other): {"check": "mismatch: y[3]"},
        },
    )
    later = _bench_json(tmp_path / "b.json", "NVIDIA H200", {source_hash(naive): {"check": "ok", "ms": 2.4}})
    m = read_measured([first])
    t = m.lookup("rmsnorm", naive)
    assert t is not None and t.median_ms == 2.6 and spread_ms(t) == pytest.approx(0.03)
    assert t.reference_median_ms == 0.08 and t.shape == {"M": 16384, "N": 4096}
    assert m.lookup("rmsnorm", other) is None and m.lookup("softmax", naive) is None and len(m) == 1
    # two judges timed it: the median of their medians, the spread covering both processes' trials
    pooled = read_measured([first, later]).lookup("rmsnorm", naive)
    assert pooled is not None and pooled.median_ms == pytest.approx(2.5)
    assert spread_ms(pooled) == pytest.approx(0.22) and pooled.min_ms == 2.4 and pooled.max_ms == 2.7
    # two processes that agree closely: the spread is still each one's own at least
    close = _bench_json(
        tmp_path / "d.json",
        "NVIDIA H200",
        {source_hash(naive): {"check": "ok", "ms": 2.601, "trial_ms": [2.6, 2.601]}},
    )
    assert spread_ms(read_measured([first, close]).lookup("rmsnorm", naive)) == pytest.approx(0.03)
    third = _bench_json(tmp_path / "c.json", "NVIDIA H200", {source_hash(naive): {"check": "ok", "ms": 2.55}})
    assert read_measured([first, later, third]).lookup("rmsnorm", naive).median_ms == pytest.approx(2.55)


@pytest.mark.parametrize(
    ("text", "why"),
    [
        ("{", "not JSON (line 1"),
        ('{"device": "NVIDIA H200"}', "not a materialized_bench.py result"),
        ('{"device": "NVIDIA H200", "rows": [{"name": 3}]}', "rows[0] needs a 'name'"),
        (
            '{"device": "NVIDIA H200", "rows": [{"name": "w", "kernels": {"ab": {"check": "crash"}}}]}',
            "no kernel with a passed",
        ),
    ],
)
def test_read_measured_refuses_bad_files_in_one_line(tmp_path: Path, text: str, why: str) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text(text)
    with pytest.raises(match=re.escape(why)) as e:
        read_measured([bad])
    assert str(bad) in str(e.value) and "\n" not in str(e.value)
    with pytest.raises(match="cannot read"):
        read_measured([tmp_path / "missing.json"])


def test_read_measured_refuses_two_devices(tmp_path: Path) -> None:
    ok = {source_hash(NAIVE): {"check": "ok", "ms": 1.0}}
    with pytest.raises(match="several devices"):
        read_measured(
            [
                _bench_json(tmp_path / "a.json", "NVIDIA H200", ok),
                _bench_json(tmp_path / "b.json", "NVIDIA H100 80GB HBM3", ok),
            ]
        )
