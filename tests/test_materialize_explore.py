"""`--explore` (issue 24 part 3): once the curriculum's skills have run out, the loop goes on with
the operator library (every operator's mechanical forward step), and those steps are reported
apart from the skills' steps.

The gate is a stand-in (every candidate correct, no timing: the CPU judge's rule decides) so no
kernel is built; the operators are the real ones on the real rmsnorm naive kernel.
"""

from __future__ import annotations

import json
from pathlib import Path

from rich.console import Console

from klineage.materialize import MaterializeOptions, make_provider, materialize
from klineage.materialize.command import _step_line, report
from klineage.workload import load_workload
from tests.conftest import REPO
from tests.test_materialize_helpers import make_skill

RMSNORM = REPO / "expert_kernels" / "rmsnorm"
NAIVE = (RMSNORM / "naive.cu").read_text()


def _run(tmp_path: Path, *, explore: bool, budget: int = 6, skills: tuple[str, ...] = ("restrict",)):  # noqa: ANN202
    wl = load_workload(RMSNORM)
    found = [
        make_skill(op, depth, workload="other", dtypes=["bfloat16"]) for depth, op in enumerate(skills, 1)
    ]
    return materialize(
        wl,
        NAIVE,
        found,
        make_provider("offline"),
        budget,
        MaterializeOptions(out_dir=tmp_path, explore=explore),
    )


def test_without_explore_the_run_stops_when_the_skills_run_out(cpu_gate: list[str], tmp_path: Path) -> None:
    res = _run(tmp_path, explore=False)
    assert [s.operator for s in res.steps] == ["restrict"]
    assert res.stop_reason == "no applicable skill left to try"
    assert res.origins == {"skills": {"gated": 1, "kept": 1}, "explore": {"gated": 0, "kept": 0}}
    assert not res.explore and res.explored == []


def test_explore_goes_on_with_operators_no_skill_offered(cpu_gate: list[str], tmp_path: Path) -> None:
    res = _run(tmp_path, explore=True, budget=4)
    assert res.steps[0].operator == "restrict" and not res.steps[0].explored
    later = res.steps[1:]
    assert later, "exploration tried nothing after the skills ran out"
    assert all(s.explored and s.skill_id is None for s in later)
    assert all(s.move == f"op:{s.operator}" and s.operator != "restrict" for s in later)
    assert res.gated == len(res.steps) == 4  # the budget is spent on exploration
    o = res.origins
    assert o["skills"] == {"gated": 1, "kept": 1}
    assert o["explore"]["gated"] == 3 and o["explore"]["kept"] >= 1
    kept_explored = [s.operator for s in later if s.kept]
    assert res.explored == kept_explored  # one line, no tournament: every kept step is on it
    assert res.applied == ["restrict-other"]  # skills applied, exploration listed apart
    doc = json.loads((tmp_path / "trace.json").read_text())
    assert doc["explore"] is True and doc["origins"] == o
    assert all(st["explored"] for st in doc["steps"][1:])


def test_every_matching_skill_is_tried_before_exploration(cpu_gate: list[str], tmp_path: Path) -> None:
    """Both skills match the naive kernel: both are tried before any operator is explored."""
    res = _run(tmp_path, explore=True, budget=4, skills=("restrict", "ldg"))
    first_explored = next(i for i, s in enumerate(res.steps) if s.explored)
    assert {s.operator for s in res.steps[:first_explored]} == {"restrict", "ldg"}
    assert all(not s.explored for s in res.steps[:first_explored])
    # the skills' operators are not offered again by exploration on the same kernel
    assert all(s.operator not in ("restrict", "ldg") for s in res.steps[first_explored:] if s.explored)


def test_report_says_what_came_from_exploration(cpu_gate: list[str], tmp_path: Path) -> None:
    res = _run(tmp_path, explore=True, budget=3)
    console = Console(record=True, width=200)
    report(res, console)
    text = console.export_text()
    o = res.origins
    assert f"from skills: 1 kept of 1 gated; from exploration: {o['explore']['kept']} kept of 2 gated" in text
    assert "(explore)" in _step_line(res.steps[1]) and "(explore)" not in _step_line(res.steps[0])
