"""`klineage heldout`: the bar and its exit codes (fast, synthetic results), bad input (exit 2, one
line), and one real instance end to end on the emulator (slow)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from klineage.cli import main
from klineage.heldout import HeldoutReport, InstanceResult, instance_names
from klineage.memorization import CarrierCheck


def run_cli(
    argv: list[str], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> tuple[int, str, str]:
    monkeypatch.setattr("sys.argv", ["klineage", *argv])
    with pytest.raises(SystemExit) as e:
        main()
        raise SystemExit(0)
    captured = capsys.readouterr()
    return int(e.value.code or 0), captured.out, captured.err


def _inst(
    name: str,
    accepted: bool = True,
    status: str = "improved",
    speedup: float | None = None,
    copy: bool = False,
) -> InstanceResult:
    return InstanceResult(
        name,
        accepted,
        "ok" if accepted else "mismatch",
        status,
        ["s-1"],
        ["op"],
        2,
        speedup,
        None,
        [],
        {"is_copy": copy, "closest": {"source": "softmax", "ast": 0.9 if copy else 0.1}},
    )


def _report(
    instances: list[InstanceResult],
    backend: str = "emu",
    skills: str = "all",
    order: str = "curriculum",
    carriers: list[CarrierCheck] | None = None,
) -> HeldoutReport:
    return HeldoutReport(backend, "offline", skills, order, 10, instances, carriers or [])


def test_instances_are_discovered() -> None:
    names = instance_names()
    assert len(names) >= 22 and "logsumexp" in names


def test_the_bar_holds_for_a_good_run() -> None:
    rep = _report([_inst(f"i{k}") for k in range(9)] + [_inst("j", status="no_improvement")])
    assert rep.pass_rate == 1.0 and rep.improved_rate == 0.9
    assert rep.failures() == [] and rep.to_dict()["ok"]


def test_each_part_of_the_bar() -> None:
    assert "pass rate" in _report([_inst("a"), _inst("b", accepted=False)]).failures()[0]
    assert "copies" in _report([_inst("a", copy=True)]).failures()[0]
    few = _report([_inst("a"), _inst("b", status="no_improvement"), _inst("c", status="no_improvement")])
    assert "improved" in few.failures()[0]
    slow = _report([_inst("a", speedup=1.5), _inst("b", speedup=2.0)], backend="cuda")
    assert "speedup" in slow.failures()[0]
    assert _report([_inst("a", speedup=4.0), _inst("b", speedup=1.5)], backend="cuda").failures() == []
    bad = CarrierCheck("s-1", "softmax", 900, 1000, 0.9, False)
    assert "carriers" in _report([_inst("a")], carriers=[bad]).failures()[0]


def test_baselines_are_held_to_correctness_and_copies_only() -> None:
    none_improved = [_inst("a", status="no_improvement", speedup=1.0)]
    assert _report(none_improved, backend="cuda", skills="none").failures() == []
    assert _report(none_improved, backend="cuda", order="random").failures() == []
    assert _report([_inst("a", copy=True)], skills="none").failures()


def test_unknown_instance_is_bad_input(monkeypatch, capsys) -> None:
    code, out, err = run_cli(["heldout", "--only", "nope", "--skills", "none", "--json"], monkeypatch, capsys)
    assert code == 2 and out == ""
    assert "unknown held-out instance" in err and "Traceback" not in err


def test_missing_store_is_bad_input(monkeypatch, capsys, tmp_path: Path) -> None:
    code, _, err = run_cli(["heldout", "--db", str(tmp_path / "none.duckdb")], monkeypatch, capsys)
    assert code == 2 and "none.duckdb: no such skill store (given with --db" in err


@pytest.mark.slow
def test_one_instance_end_to_end(monkeypatch, capsys, tmp_path: Path) -> None:
    code, out, _ = run_cli(
        [
            "heldout",
            "--only",
            "axpy",
            "--skills",
            "none",
            "--budget",
            "1",
            "--json",
            "--out",
            str(tmp_path / "run"),
        ],
        monkeypatch,
        capsys,
    )
    doc = json.loads(out)
    (inst,) = doc["instances"]
    assert inst["name"] == "axpy" and inst["accepted"] and inst["category"] == "ok"
    assert inst["memorization"]["is_copy"] is False
    assert doc["pass_rate"] == 1.0 and doc["ok"] and code == 0
    assert (tmp_path / "run" / "axpy" / "best.cu").is_file()


def test_jobs_keep_the_instance_order(monkeypatch, capsys, tmp_path: Path) -> None:
    """--jobs 2 materializes two instances at once; the report lists them in the order asked."""
    code, out, _ = run_cli(
        [
            "heldout",
            "--only",
            "gemv",
            "--only",
            "axpy",
            "--skills",
            "none",
            "--budget",
            "1",
            "--jobs",
            "2",
            "--json",
            "--out",
            str(tmp_path / "run"),
        ],
        monkeypatch,
        capsys,
    )
    doc = json.loads(out)
    assert [i["name"] for i in doc["instances"]] == ["gemv", "axpy"]
    assert all(i["accepted"] for i in doc["instances"]) and code == 0
    assert (tmp_path / "run" / "gemv" / "best.cu").is_file() and (
        tmp_path / "run" / "axpy" / "best.cu"
    ).is_file()
