"""benchmarks/materialize_bench.py: the leave-one-out skill filter and the table (no gating)."""

from __future__ import annotations

import importlib.util

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
    both.risks = [{"workload": "a", "category": "mismatch"}, {"workload": "b", "category": "crash"}]
    out = bench.leave_one_out([only_a, both], "a", {"a": ["float16"], "b": ["float32"]})
    (s,) = out
    assert s.skill_id == "both" and [p["workload"] for p in s.provenance] == ["b"]
    assert list(s.effects["per_workload"]) == ["b"] and s.scope["workloads"] == ["b"]
    assert s.scope["dtypes"] == ["float32"] and s.risks == [{"workload": "b", "category": "crash"}]
    assert [p["workload"] for p in both.provenance] == ["a", "b"]  # the input is left alone


def test_table_summarises_each_mode() -> None:
    row = {"workload": "w", "mode": "curriculum", "skills_available": 3, "gated": 2, "kept": 1, "ops_added": ["restrict"],
           "start_ok": True, "speedup": 2.0, "speedup_vs_torch": 0.5}
    text = bench.table([row, {**row, "mode": "none", "speedup": 1.0}], gpu=True)
    assert "w | curriculum | 3 | 2 | 1 | restrict | 2.00 | 0.50" in text
    assert "curriculum: 1 steps kept over 1 workloads" in text and "geomean speedup over naive 2.00x" in text
    assert bench.geomean([2.0, 8.0, None]) == 4.0
