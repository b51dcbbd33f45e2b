"""`klineage materialize`: bad input (exit 2, one line), a start kernel failing its gate (exit 1,
trace kept), a successful run with --json (exit 0), an LLM run stopped by --max-cost, a provider
failure (exit 3, the run closed) and an unknown model (exit 2)."""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from rich.console import Console

from klineage.errors import KLineageError
from klineage.llm.stub import Reply, StubServer
from klineage.materialize.command import MaterializeArgs, run
from klineage.store.db import Store
from tests.conftest import REPO
from tests.test_materialize_helpers import SCALE, skill_store


def _cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    full = {**os.environ, **(env or {})}
    return subprocess.run(
        [sys.executable, "-m", "klineage", "materialize", *args],
        capture_output=True,
        text=True,
        cwd=REPO,
        env=full,
        timeout=600,
    )


@pytest.fixture(scope="module")
def db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return skill_store(tmp_path_factory.mktemp("db") / "skills.duckdb")


def _run(**kw: object) -> int:
    quiet = Console(file=open(os.devnull, "w"))  # noqa: SIM115
    return run(MaterializeArgs(**kw), quiet, quiet)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("kw", "message"),
    [
        ({"provider": "gpt"}, "unknown provider 'gpt'"),
        ({"skills": "some"}, "unknown --skills 'some'"),
        ({"order": "alpha"}, "unknown --order 'alpha'"),
        ({"budget": 0}, "--budget must be between 1 and 2147483647"),
        ({"budget": 3_000_000_000}, "--budget must be between 1 and 2147483647"),
        ({"provider": "anthropic", "max_cost": -1.0}, "--max-cost must be a positive"),
        ({"model": "claude-sonnet-4-5"}, "apply to an LLM provider"),
        ({"measured": [Path("t.json")], "backend": "cuda"}, "with --backend cuda the gate times"),
        ({"explore": True, "skills": "none"}, "--skills none tries the operators from the start"),
    ],
)
def test_bad_options(kw: dict, message: str, db: Path) -> None:
    with pytest.raises(KLineageError, match=message.replace("(", r"\(")):
        _run(workload_dir=SCALE, db=db, **kw)


def test_bad_inputs(tmp_path: Path, db: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    bare = tmp_path / "wl"
    bare.mkdir()
    (bare / "workload.py").write_text((SCALE / "workload.py").read_text())
    with pytest.raises(KLineageError, match=r"no start kernel \(naive.cu\); give one with --start"):
        _run(workload_dir=bare, db=db)
    with pytest.raises(KLineageError, match="no such start kernel"):
        _run(workload_dir=SCALE, start=tmp_path / "nope.cu", db=db)
    with pytest.raises(KLineageError, match=r"missing.duckdb: no such skill store \(given with --db"):
        _run(workload_dir=SCALE, db=tmp_path / "missing.duckdb")
    empty = skill_store(tmp_path / "empty.duckdb", [])
    with pytest.raises(KLineageError, match="the skill store is empty"):
        _run(workload_dir=SCALE, db=empty)
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    with pytest.raises(KLineageError, match="ANTHROPIC_API_KEY is not set"):
        _run(workload_dir=SCALE, db=db, provider="anthropic")


def test_bad_measured_file_is_one_line_exit_2(db: Path, tmp_path: Path) -> None:
    bad = tmp_path / "times.json"
    bad.write_text('{"rows": []}')
    r = _cli(str(SCALE), "--db", str(db), "--measured", str(bad), "--out", str(tmp_path / "out"))
    assert r.returncode == 2 and "not a materialized_bench.py result" in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1 and not (tmp_path / "out").exists()


def test_missing_key_is_one_line_exit_2(db: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k != "ANTHROPIC_API_KEY"}
    r = subprocess.run(
        [
            sys.executable,
            "-m",
            "klineage",
            "materialize",
            str(SCALE),
            "--db",
            str(db),
            "--provider",
            "anthropic",
        ],
        capture_output=True,
        text=True,
        cwd=REPO,
        env=env,
        timeout=600,
    )
    assert r.returncode == 2, r.stderr
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and "ANTHROPIC_API_KEY" in lines[0] and lines[0].startswith("error:")


def test_success_json(db: Path, tmp_path: Path) -> None:
    r = _cli(str(SCALE), "--db", str(db), "--budget", "3", "--out", str(tmp_path / "out"), "--json")
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    assert doc["status"] == "improved" and doc["applied"] == [
        "restrict-scale_test",
        "launch_bounds-scale_test",
    ]
    assert (tmp_path / "out" / "best.cu").is_file() and (tmp_path / "out" / "trace.json").is_file()


def test_start_failing_its_gate_exit_1(db: Path, tmp_path: Path) -> None:
    bad = tmp_path / "bad.cu"
    bad.write_text((SCALE / "naive.cu").read_text().replace('extern "C" void launch', "void no_launcher"))
    r = _cli(str(SCALE), "--db", str(db), "--start", str(bad), "--out", str(tmp_path / "out"))
    assert r.returncode == 1, r.stderr
    assert "nothing to improve from" in r.stderr and "trace.json" in r.stderr
    assert json.loads((tmp_path / "out" / "trace.json").read_text())["status"] == "start_rejected"


def test_provider_failure_exits_3_with_one_line_and_a_closed_run(tmp_path: Path) -> None:
    runs = skill_store(tmp_path / "runs.duckdb")
    with StubServer([Reply(status=401)]) as stub:
        r = _cli(
            str(SCALE),
            "--db",
            str(runs),
            "--provider",
            "anthropic",
            "--base-url",
            stub.base_url,
            "--llm-timeout",
            "5",
            "--out",
            str(tmp_path / "out"),
            env={"ANTHROPIC_API_KEY": "sk-test-cli"},
        )
    assert r.returncode == 3, r.stderr
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: provider error: anthropic API refused the request")
    assert "401" in lines[0] and "sk-test-cli" not in r.stderr + r.stdout
    with Store(runs, read_only=True) as store:
        rows = store.rows("SELECT status, finished_at FROM materialization_runs")
    assert [(row["status"], row["finished_at"] is not None) for row in rows] == [("provider_failed", True)]


def test_unknown_model_exit_2_naming_the_known_ones(db: Path, tmp_path: Path) -> None:
    r = _cli(
        str(SCALE),
        "--db",
        str(db),
        "--provider",
        "anthropic",
        "--model",
        "claude-sonnet-4-5",
        "--out",
        str(tmp_path / "out"),
        env={"ANTHROPIC_API_KEY": "sk-test-cli"},
    )
    assert r.returncode == 2, r.stderr
    lines = r.stderr.strip().splitlines()
    assert (
        len(lines) == 1
        and "unknown model 'claude-sonnet-4-5'" in lines[0]
        and "claude-sonnet-4-6" in lines[0]
    )
    assert not (tmp_path / "out").exists()


def test_cost_limit_via_cli(db: Path, tmp_path: Path) -> None:
    with StubServer([Reply("nothing to return " * 300)]) as stub:
        r = _cli(
            str(SCALE),
            "--db",
            str(db),
            "--provider",
            "anthropic",
            "--base-url",
            stub.base_url,
            "--max-cost",
            "0.002",
            "--out",
            str(tmp_path / "out"),
            env={"ANTHROPIC_API_KEY": "sk-test-cli"},
        )
    assert r.returncode == 1, r.stderr
    assert "stopped: cost limit reached" in r.stderr
    trace = json.loads((tmp_path / "out" / "trace.json").read_text())
    assert "cost limit" in trace["stop_reason"] and trace["cost"]["spent_usd"] >= 0.002


def test_budget_above_int32_is_one_line_exit_2(db: Path, tmp_path: Path) -> None:
    r = _cli(str(SCALE), "--db", str(db), "--budget", "3000000000", "--out", str(tmp_path / "out"))
    assert r.returncode == 2, r.stderr
    assert r.stderr.strip().splitlines() == [
        "error: --budget must be between 1 and 2147483647 (got 3000000000)"
    ]


def test_without_db_no_store_appears_in_the_working_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The shipped skills are built into a store under $KLINEAGE_HOME, and the run says where."""
    from io import StringIO

    from klineage.materialize.command import open_skills

    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("KLINEAGE_DB", raising=False)
    monkeypatch.setenv("KLINEAGE_HOME", str(tmp_path / "home"))
    said = StringIO()
    store, skills = open_skills(MaterializeArgs(SCALE), Console(file=said, width=400))
    store.close()
    assert skills and not (tmp_path / "skills_db").exists()
    assert store.path.parent == tmp_path / "home" / "shipped"
    assert f"built into {store.path}" in said.getvalue()
    built = store.path
    store, skills = open_skills(MaterializeArgs(SCALE, skills="none"))
    store.close()
    assert (
        skills == []
        and store.path.is_relative_to(tmp_path / "home")
        and not (tmp_path / "skills_db").exists()
    )
    # skills list and the report without --db read that store: the admissions recorded there show
    from klineage.export import reading_store

    assert reading_store(None) == built
    assert reading_store(tmp_path / "x.duckdb") == tmp_path / "x.duckdb"


def test_skill_whose_roundtrip_failed_is_not_offered(tmp_path: Path) -> None:
    """launch_bounds could not be re-derived forward where it was mined: evidence, not a skill."""
    from tests.test_materialize_helpers import scale_skills

    failed = {"roundtrips": [{"workload": "scale_test", "ok": False, "message": "apply refused"}]}
    skills = [
        dataclasses.replace(s, verification=failed) if s.operator == "launch_bounds" else s
        for s in scale_skills()
    ]
    db = skill_store(tmp_path / "s.duckdb", skills)
    r = _cli(str(SCALE), "--db", str(db), "--budget", "3", "--out", str(tmp_path / "out"), "--json")
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    assert doc["applied"] == ["restrict-scale_test"]
    held = dict(map(tuple, doc["skipped_at_start"]))
    assert "evidence, not a skill" in held["launch_bounds-scale_test"]
    r = _cli(
        str(SCALE),
        "--db",
        str(db),
        "--budget",
        "3",
        "--out",
        str(tmp_path / "out2"),
        "--json",
        "--include-unverified",
    )
    assert json.loads(r.stdout)["applied"] == ["restrict-scale_test", "launch_bounds-scale_test"], r.stderr
