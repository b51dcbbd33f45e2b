"""Mining end to end on the CPU emulator: lineage, skills, resume after kill -9, the cache."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from klineage import lineage
from klineage.cards import from_markdown, to_markdown
from klineage.errors import KLineageError
from klineage.mining import mine_corpus
from klineage.skills import load_skills
from klineage.store.db import Store
from tests.conftest import REPO

CORPUS = REPO / "tests/data/mining"
OPS = ("launch_bounds", "pragma_unroll", "restrict")


@pytest.fixture(scope="module")
def mined(tmp_path_factory: pytest.TempPathFactory) -> Path:
    db = tmp_path_factory.mktemp("mine") / "s.duckdb"
    mine_corpus([CORPUS], db=db, workers=2)
    return db


def _table(db: Path, sql: str) -> list[dict]:
    with Store(db, read_only=True) as s:
        return s.rows(sql)


def test_lineage_and_skills(mined: Path) -> None:
    with Store(mined, read_only=True) as s:
        g = lineage.build(s, "scale_test")
        skills = load_skills(s)
    ops = {d["operator"] for _, _, d in g.edges(data=True)}
    assert set(OPS) <= ops, ops
    assert g.nodes[g.graph["expert"]]["depth"] == 0
    assert g.number_of_edges() == g.number_of_nodes() - 1
    by_op = {s.operator: s for s in skills}
    for op in OPS:
        sk = by_op[op]
        assert sk.intent and sk.carrier.startswith("--- before.cu")
        assert sk.scope["workloads"] == ["scale_test"] and sk.scope["dtypes"] == ["float32"]
        assert sk.evidence["steps"] and sk.provenance[0]["source_kernel_hash"]
        assert (
            sk.effects["per_workload"]["scale_test"]["time_ratio"] == "unmeasured"
        )  # no GPU: never invented
    assert by_op["restrict"].verification["roundtrips"][0]["ok"] is True
    lb = by_op["launch_bounds"]
    assert any(p["name"] == "fixed_block_size" and p["holds"] for p in lb.preconditions)


def test_carrier_is_minimal(mined: Path) -> None:
    """Carriers are diffs of the changed hunks, within the memorization check's carrier bound."""
    from klineage.memorization import check_carriers

    expert = (CORPUS / "scale/expert.cu").read_text()
    skills = load_skills(Store(mined, read_only=True))
    assert all(sk.carrier.startswith("--- before.cu") for sk in skills)
    checks = check_carriers(skills, {"scale_test": expert})
    assert checks and all(c.ok for c in checks), [c for c in checks if not c.ok]


def test_cards_round_trip(mined: Path) -> None:
    for sk in load_skills(Store(mined, read_only=True)):
        again = from_markdown(to_markdown(sk), "card.md")
        assert again.to_dict() == sk.to_dict()


def test_rerun_gates_nothing_new(mined: Path) -> None:
    report = mine_corpus([CORPUS], db=mined, workers=2)
    (w,) = report["workloads"]
    assert w["gate_runs"] == w["cached_gates"], w
    steps = _table(mined, "SELECT count(*) AS n, count(DISTINCT step_id) AS d FROM steps")[0]
    assert steps["n"] == steps["d"]


def test_no_workloads_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(KLineageError, match="no workloads"):
        mine_corpus([tmp_path], db=tmp_path / "s.duckdb")


def test_expert_failing_its_gate_is_skipped(tmp_path: Path) -> None:
    bad = tmp_path / "corpus" / "bad"
    bad.mkdir(parents=True)
    (bad / "workload.py").write_text((CORPUS / "scale/workload.py").read_text())
    (bad / "expert.cu").write_text(
        (CORPUS / "scale/expert.cu").read_text().replace("2.0f * x[i]", "3.0f * x[i]")
    )
    report = mine_corpus([tmp_path / "corpus"], db=tmp_path / "s.duckdb")
    (w,) = report["workloads"]
    assert w["skipped"].startswith("expert fails its own gate: mismatch")


def _snapshot(db: Path) -> dict:
    with Store(db, read_only=True) as s:
        return {
            "states": sorted((r["state_hash"], r["depth"]) for r in s.rows("SELECT * FROM states")),
            "steps": sorted((r["step_id"], r["accepted"], r["taken"]) for r in s.rows("SELECT * FROM steps")),
            "skills": sorted(r["skill_id"] for r in s.rows("SELECT skill_id FROM skills")),
        }


def test_kill_minus_9_then_resume(tmp_path: Path, mined: Path) -> None:
    """A real `klineage mine` killed mid-run; the re-run finishes with the same rows as a clean run."""
    db = tmp_path / "killed.duckdb"
    home = tmp_path / "home"  # a cold cache, so the first run is slow enough to kill mid-walk
    env = {**os.environ, "KLINEAGE_HOME": str(home)}
    cmd = [sys.executable, "-m", "klineage", "mine", str(CORPUS), "--db", str(db), "--json", "--workers", "2"]
    proc = subprocess.Popen(
        cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True
    )
    deadline = time.time() + 120
    while time.time() < deadline and len(list(home.rglob("result.json"))) < 3:
        time.sleep(0.2)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    assert proc.returncode == -signal.SIGKILL
    out = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["workloads"][0]["accepted"] >= 0
    assert _snapshot(db) == _snapshot(mined)
    runs = _table(db, "SELECT status FROM mining_runs ORDER BY started_at")
    assert [r["status"] for r in runs] == [
        "interrupted",
        "done",
    ]  # the killed run's row does not stay `running`
    # the skills as `skills list --json` prints them: byte-identical to an uninterrupted run's
    listed = [
        subprocess.run(
            [sys.executable, "-m", "klineage", "skills", "list", "--json", "--db", str(d)],
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
        ).stdout
        for d in (db, mined)
    ]
    assert listed[0] and listed[0] == listed[1]


def test_explicit_beam_1_is_the_default_walk(mined: Path, tmp_path: Path) -> None:
    """`beam=1` (`mine --beam 1`) walks greedily on the emulator: the rows of the default walk."""
    db = tmp_path / "beam1.duckdb"
    assert mine_corpus([CORPUS], db=db, workers=2, beam=1)["beam"] == 1
    assert _snapshot(db) == _snapshot(mined)
    sql = "SELECT step_id, from_state, to_state, category, roundtrip_ok, carrier, preconditions FROM steps ORDER BY step_id"
    assert _table(db, sql) == _table(mined, sql)


def test_shipped_store_is_rebuilt_from_the_text_export(mined: Path, tmp_path: Path) -> None:
    from klineage.export import export_skills, shipped_store

    export_skills(mined, tmp_path / "export", "md")
    db = shipped_store(tmp_path / "fresh.duckdb", tmp_path / "export")
    with Store(mined, read_only=True) as a, Store(db, read_only=True) as b:
        assert [s.to_dict() for s in load_skills(a)] == [s.to_dict() for s in load_skills(b)]


def test_skills_verify_admits_on_a_foreign_workload(mined: Path, tmp_path: Path, monkeypatch, capsys) -> None:
    """restrict, mined from scale_test, applied to vector_add's naive kernel: kept -> admitted."""
    import shutil

    from klineage.cli import main

    db = tmp_path / "copy.duckdb"
    shutil.copyfile(mined, db)
    skill = next(s for s in load_skills(Store(db, read_only=True)) if s.operator == "restrict")
    assert not skill.admitted
    monkeypatch.setattr(
        "sys.argv",
        [
            "klineage",
            "skills",
            "verify",
            skill.skill_id,
            "--workload",
            str(REPO / "examples/vector_add"),
            "--db",
            str(db),
            "--json",
        ],
    )
    with pytest.raises(SystemExit) as e:
        main()
    doc = json.loads(capsys.readouterr().out)
    assert e.value.code == 0 and doc["verified"] and doc["admitted"], doc
    again = next(s for s in load_skills(Store(db, read_only=True)) if s.skill_id == skill.skill_id)
    assert again.admitted and again.verification["materialized_on"][0]["workload"] == "vector_add"


def test_deopt_cli_lists_operators_and_sites(monkeypatch, capsys) -> None:
    from klineage.cli import main

    monkeypatch.setattr("sys.argv", ["klineage", "deopt", "list", "--json"])
    with pytest.raises(SystemExit):
        main()
    ops = json.loads(capsys.readouterr().out)
    assert len(ops) >= 20 and {"restrict", "vectorize", "tensor_core", "warp_shuffle_reduce"} <= {
        o["name"] for o in ops
    }
    monkeypatch.setattr(
        "sys.argv", ["klineage", "deopt", "sites", str(REPO / "examples/row_sum/expert.cu"), "--json"]
    )
    with pytest.raises(SystemExit):
        main()
    rows = json.loads(capsys.readouterr().out)
    assert {"launch_bounds", "restrict", "pragma_unroll"} <= {
        r["operator"] for r in rows if r["direction"] == "present"
    }
    assert all("anchor" in r for r in rows if "error" not in r)
