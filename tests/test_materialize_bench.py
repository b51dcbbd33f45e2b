"""benchmarks/materialize_bench.py: the leave-one-out skill filter and the table (no gating)."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest

from tests.conftest import REPO
from tests.test_materialize_helpers import make_skill

_spec = importlib.util.spec_from_file_location("materialize_bench", REPO / "benchmarks/materialize_bench.py")
assert _spec is not None and _spec.loader is not None
bench = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(bench)


def test_leave_one_out_strips_the_held_out_workload() -> None:
    only_a = make_skill("restrict", workload="a", skill_id="only_a")
    both = make_skill("ldg", workload="a", skill_id="both")
    both.provenance.append({"workload": "b", "lineage_depth": 2})
    both.effects["per_workload"]["b"] = {"time_ratio": 2.0}
    both.scope["workloads"] = ["a", "b"]
    both = replace(
        both, risks=[{"workload": "a", "category": "mismatch"}, {"workload": "b", "category": "crash"}]
    )
    out = bench.leave_one_out([only_a, both], "a", {"a": ["float16"], "b": ["float32"]})
    (s,) = out
    assert s.skill_id == "both" and [p["workload"] for p in s.provenance] == ["b"]
    assert list(s.effects["per_workload"]) == ["b"] and s.scope["workloads"] == ["b"]
    assert s.scope["dtypes"] == ["float32"] and s.risks == [{"workload": "b", "category": "crash"}]
    assert [p["workload"] for p in both.provenance] == ["a", "b"]  # the input is left alone


def test_table_summarises_each_mode() -> None:
    row = {
        "workload": "w",
        "mode": "curriculum",
        "skills_available": 3,
        "gated": 2,
        "kept": 1,
        "ops_added": ["restrict"],
        "start_ok": True,
        "speedup": 2.0,
        "speedup_vs_torch": 0.5,
    }
    text = bench.table([row, {**row, "mode": "none", "speedup": 1.0}], gpu=True)
    assert "w | curriculum | 3 | 2 | 1 | restrict | 2.00 | 0.50" in text
    assert "curriculum: 1 steps kept over 1 workloads" in text and "geomean speedup over naive 2.00x" in text
    assert bench.geomean([2.0, 8.0, None]) == 4.0


def _step(i: int, gated: bool = True, kept: bool = False, skill: str | None = None) -> dict:
    return {
        "index": i,
        "move": f"move{i}",
        "skill_id": skill or (f"skill{i}" if gated else None),
        "gated": gated,
        "kept": kept,
        "candidate_file": f"step-{i:02d}.cu" if gated else None,
    }


def test_budget_curve_truncates_at_the_kth_gated_candidate() -> None:
    # kept, duplicate (not gated), rejected, kept, no candidate, kept
    steps = [
        _step(1, kept=True),
        _step(2, gated=False),
        _step(3),
        _step(4, kept=True),
        _step(5, gated=False),
        _step(6, kept=True),
    ]
    assert [s["index"] for s in bench.prefix_steps(steps, 1)] == [1]
    assert [s["index"] for s in bench.prefix_steps(steps, 2)] == [1, 2, 3]
    assert [s["index"] for s in bench.prefix_steps(steps, 3)] == [1, 2, 3, 4]  # stops before step 5
    curve = bench.budget_curve({"budget": 5, "steps": steps}, 5)
    assert [p["candidate_file"] for p in curve] == [
        "step-01.cu",
        "step-01.cu",
        "step-04.cu",
        "step-06.cu",
        "step-06.cu",
    ]
    assert [p["applied"] for p in curve][2] == ["skill1", "skill4"] and curve[4]["kept_steps"] == [1, 4, 6]
    assert [p["gated"] for p in curve] == [1, 2, 3, 4, 4]
    # nothing kept yet: the start kernel
    first_rejected = [_step(1), _step(2, kept=True)]
    assert bench.budget_curve({"budget": 2, "steps": first_rejected}, 2)[0]["candidate_file"] is None
    # the loop's other limit: at most 3k proposals (steps) for budget k, gated or not
    dups = [_step(1, gated=False), _step(2, gated=False), _step(3, gated=False), _step(4, kept=True)]
    c = bench.budget_curve({"budget": 2, "steps": dups}, 2)
    assert c[0]["candidate_file"] is None and c[0]["steps"] == 3 and c[1]["candidate_file"] == "step-04.cu"
    assert len(bench.prefix_steps(dups, 1, max_proposals=4)) == 4
    with pytest.raises(ValueError, match="over the run's own"):
        bench.budget_curve({"budget": 2, "steps": dups}, 3)


def test_run_labels_and_curve_files(tmp_path: Path) -> None:
    assert bench.run_labels(["curriculum", "random", "none"], 7, None) == [
        ("curriculum", "curriculum", 7),
        ("random", "random", 7),
        ("none", "none", 7),
    ]
    assert bench.run_labels(["random", "none"], 7, 2) == [
        ("random-s0", "random", 0),
        ("random-s1", "random", 1),
        ("none", "none", 7),
    ]
    run = tmp_path / "w" / "random-s1"
    run.mkdir(parents=True)
    (run / "start.cu").write_text("naive")
    (run / "step-01.cu").write_text("one")
    (run / "step-03.cu").write_text("three")
    trace = {
        "status": "improved",
        "budget": 3,
        "gated": 3,
        "steps": [_step(1, kept=True), _step(2), {**_step(3, kept=True), "candidate_file": "step-03.cu"}],
    }
    (run / "trace.json").write_text(json.dumps(trace))
    (tmp_path / "w" / "none").mkdir()  # a run that left no trace
    idx = bench.write_curve(
        tmp_path, [("random-s1", "random", 1, "w"), ("none", "none", 0, "w")], 3, Path("corpus")
    )
    assert json.loads((tmp_path / "curve.json").read_text()) == idx
    assert [(e["k"], e["from"], e["applied"]) for e in idx["entries"]] == [
        (1, "step-01.cu", ["skill1"]),
        (2, "step-01.cu", ["skill1"]),
        (3, "step-03.cu", ["skill1", "skill3"]),
    ]
    assert (tmp_path / idx["entries"][2]["file"]).read_text() == "three"
    assert idx["entries"][0]["file"] == "curve/random-s1/w/budget-1.cu"
    assert [r["status"] for r in idx["runs"]] == ["improved", "no trace"] and idx["labels"] == [
        "random-s1",
        "none",
    ]


@pytest.mark.slow
def test_a_shorter_budget_is_a_prefix_of_the_longer_run(tmp_path: Path) -> None:
    """The claim the budget curve rests on, checked for real once: softmax, random order (seed 3),
    leave-one-out skills of the shipped store; the budget-3 run keeps what the budget-10 run's
    first 3 gated candidates kept, and ends at the curve's budget-3 kernel (second run: gate cache)."""
    from klineage.export import shipped_store

    db = shipped_store(tmp_path / "skills.duckdb")
    outs = {}
    for budget in (10, 3):
        out = tmp_path / f"b{budget}"
        r = subprocess.run(
            [
                sys.executable,
                str(REPO / "benchmarks/materialize_bench.py"),
                "--backend",
                "emu",
                "--db",
                str(db),
                "--workloads",
                "softmax",
                "--modes",
                "random",
                "--seed",
                "3",
                "--budget",
                str(budget),
                "--out",
                str(out),
                "--json",
            ],
            capture_output=True,
            text=True,
            timeout=600,
        )
        assert r.returncode == 0, r.stderr[-2000:]
        outs[budget] = out
    for label in ("random",):
        long = json.loads((outs[10] / "softmax" / label / "trace.json").read_text())
        short = json.loads((outs[3] / "softmax" / label / "trace.json").read_text())
        assert long["gated"] > 3  # otherwise the check says nothing
        keys = ("move", "verdict", "kept", "gated", "kernel_hash")
        assert [[s[k] for k in keys] for s in short["steps"]] == [
            [s[k] for k in keys] for s in bench.prefix_steps(long["steps"], 3)
        ]
        assert (outs[3] / "softmax" / label / "best.cu").read_text() == (
            outs[10] / "curve" / label / "softmax" / "budget-3.cu"
        ).read_text()
    index = json.loads((outs[10] / "curve.json").read_text())
    assert len(index["entries"]) == 10 and index["labels"] == ["random"]


def test_budget_curve_follows_a_tournament_winner() -> None:
    """Steps 1-2 are alternatives gated on the same kernel: step 1 led after one candidate, step 2
    was faster and won (step 1 `outpaced`, not kept); best_file says which kernel led at each k."""
    steps = [
        {**_step(1), "verdict": "outpaced", "best_file": "step-01.cu", "group": 1},
        {**_step(2, kept=True), "best_file": "step-02.cu", "group": 1},
        {**_step(3), "best_file": "step-02.cu"},
    ]
    curve = bench.budget_curve({"budget": 3, "steps": steps}, 3)
    assert [p["candidate_file"] for p in curve] == ["step-01.cu", "step-02.cu", "step-02.cu"]


def test_candidates_index_lists_each_correct_text_once(tmp_path: Path) -> None:
    for label, texts in (("curriculum", ["a", "b"]), ("random-s0", ["b", "c"])):
        run = tmp_path / "w" / label
        run.mkdir(parents=True)
        (run / "start.cu").write_text("naive")
        steps = []
        for i, text in enumerate(texts, 1):
            (run / f"step-0{i}.cu").write_text(text)
            steps.append({**_step(i), "accepted": text != "c", "candidate_file": f"step-0{i}.cu"})
        (run / "trace.json").write_text(json.dumps({"steps": steps}))
    n = bench.write_candidates(
        tmp_path,
        [("curriculum", "curriculum", 0, "w"), ("random-s0", "random", 0, "w"), ("none", "none", 0, "w")],
    )
    index = json.loads((tmp_path / "candidates.json").read_text())
    # naive, a, b (c failed its gate; b of random-s0 is curriculum's b)
    assert n == 3 and sorted((tmp_path / f).read_text() for f in index["files"]["w"]) == ["a", "b", "naive"]
    # with measured times: only the kernels still without one
    from klineage.gates.result import Timing
    from klineage.materialize.measured import MeasuredTimes
    from klineage.source.digest import source_hash

    timed = MeasuredTimes("NVIDIA H200", {("w", source_hash("a")): Timing(1.0, 1.0, 1.0, 1, 1)})
    assert bench.write_candidates(tmp_path, [("curriculum", "curriculum", 0, "w")], timed) == 2


def test_measured_curve_divides_the_naive_time_by_each_points(tmp_path: Path) -> None:
    from klineage.gates.result import Timing
    from klineage.materialize.measured import MeasuredTimes
    from klineage.source.digest import source_hash

    corpus = tmp_path / "corpus"
    (corpus / "layernorm").mkdir(parents=True)
    (corpus / "layernorm" / "naive.cu").write_text("naive")
    for name, text in (("a.cu", "fast"), ("b.cu", "untimed")):
        (tmp_path / name).write_text(text)
    entries = [
        {"label": "curriculum", "mode": "curriculum", "seed": 0, "workload": "layernorm", "k": k, "file": f}
        for k, f in ((1, "a.cu"), (2, "b.cu"))
    ]
    times = {
        ("layernorm", source_hash(t)): Timing(ms, ms, ms, 1, 1) for t, ms in (("naive", 3.0), ("fast", 0.15))
    }
    text, summary = bench.measured_curve(
        tmp_path,
        {"budget": 2, "labels": ["curriculum"], "entries": entries},
        corpus,
        MeasuredTimes("NVIDIA H200", times),
    )
    assert "| layernorm | curriculum | 20.00 | - |" in text
    assert summary["memory-bound"][0]["curriculum"]["geomean"] == pytest.approx(20.0)
    assert summary["memory-bound"][1]["curriculum"]["n"] == 0


def test_explore_mode_runs_the_curriculum_then_the_operator_library(
    cpu_gate: list[str], tmp_path: Path
) -> None:
    """`--modes explore`: the curriculum's run with `explore` on, its rows counting the skills'
    and the exploration's steps apart (the gate is the stand-in: no build)."""
    import argparse

    assert "explore" not in bench.DEFAULT_MODES and bench.MODES["explore"] == ("all", "curriculum")
    args = argparse.Namespace(budget=3, backend="emu", timeout=10.0, out=tmp_path)
    skills = [make_skill("restrict", 1, workload="other", dtypes=["bfloat16"])]
    row = bench.run_one(REPO / "expert_kernels" / "rmsnorm", skills, "explore", "explore", 0, args, None)
    assert row["origins"]["skills"] == {"gated": 1, "kept": 1}
    assert row["origins"]["explore"]["gated"] == 2 and row["gated"] == 3
    assert row["applied"] == ["restrict-other", *row["explored"]] and row["explored"]


def test_timed_curve_reads_the_runs_own_gate_times(tmp_path: Path) -> None:
    """A GPU run's budget curve: the start kernel's time over the time of the kernel leading after
    k candidates, from trace.json; a CPU run (no times) gives no table."""
    run = tmp_path / "softmax" / "curriculum"
    run.mkdir(parents=True)
    (run / "start.cu").write_text("naive")
    (run / "step-01.cu").write_text("one")
    (run / "step-02.cu").write_text("two")
    steps = [{**_step(1, kept=True), "time_ms": 2.0}, {**_step(2), "time_ms": 9.0}]
    trace = {"status": "improved", "budget": 2, "gated": 2, "start_time_ms": 8.0, "steps": steps}
    (run / "trace.json").write_text(json.dumps(trace))
    idx = bench.write_curve(tmp_path, [("curriculum", "curriculum", 0, "softmax")], 2, Path("corpus"))
    timed = bench.timed_curve(tmp_path, idx)
    assert timed is not None
    rows = timed[1]["memory-bound"]
    assert [r["curriculum"]["geomean"] for r in rows] == [4.0, 4.0]  # step 2 (slower) was not kept
    assert timed[1]["area"]["memory-bound"]["curriculum"]["area"] == 4.0
    trace["start_time_ms"] = None
    (run / "trace.json").write_text(json.dumps(trace))
    assert bench.timed_curve(tmp_path, idx) is None
