"""The beam walk (`mine --beam N`): width 1 is the greedy walk, row for row and job for job; a
wider beam records a deterministic DAG whose taken path runs from the expert to the deepest
state; an interrupted or cut beam walk resumes to the rows of an uninterrupted one without gating
a recorded step again. The gate is the hash stand-in of test_mining_concurrent (the walker's logic
does not depend on what decides a verdict); the CLI checks run the real emulator on the expert only."""

from __future__ import annotations

import _thread
import json
import threading
from pathlib import Path

import networkx as nx
import pytest

from klineage import lineage
from klineage.errors import KLineageError
from klineage.executor import GateJob
from klineage.mining import mine_corpus
from klineage.store.db import Store
from tests.conftest import REPO
from tests.test_mining_concurrent import CORPUS, NAMES, HashExecutor, snapshot


def _mine(
    db: Path, hook: object = None, seed: int = 0, workers: int = 2, max_steps: int = 4, **kw: object
) -> tuple[dict, list[str]]:
    jobs: list[str] = []
    lock = threading.Lock()

    def note(job: GateJob) -> None:
        with lock:
            jobs.append(job.name)
        if callable(hook):
            hook(job)

    report = mine_corpus(
        CORPUS, db=db, workers=workers, max_steps=max_steps, executor=HashExecutor(workers, seed, note), **kw
    )
    return report, jobs


def test_beam_1_is_the_greedy_walk(tmp_path: Path) -> None:
    """Width 1 (explicit) and the default: the same rows, the same gate jobs, the same summary."""
    default, jobs_default = _mine(tmp_path / "default.duckdb", workers=1)
    one, jobs_one = _mine(tmp_path / "one.duckdb", workers=1, beam=1)
    assert snapshot(tmp_path / "one.duckdb") == snapshot(tmp_path / "default.duckdb")
    assert jobs_one == jobs_default and jobs_default
    keys = ("workload", "states", "depth", "accepted", "rejected", "refused", "gate_runs", "skills")
    assert [{k: w[k] for k in keys} for w in one["workloads"]] == [
        {k: w[k] for k in keys} for w in default["workloads"]
    ]
    assert default["beam"] == one["beam"] == 1


def _dag_facts(db: Path, name: str) -> tuple[nx.DiGraph, list[dict], list[dict]]:
    with Store(db, read_only=True) as s:
        g = lineage.build(s, name)
        states = s.rows("SELECT state_hash, depth FROM states WHERE workload = ?", [name])
        steps = s.rows("SELECT * FROM steps WHERE workload = ?", [name])
    return g, states, steps


def test_beam_records_a_deterministic_dag_with_one_taken_path(tmp_path: Path) -> None:
    report, _ = _mine(tmp_path / "b3.duckdb", beam=3, max_steps=6)
    again, _ = _mine(tmp_path / "b3-w1.duckdb", beam=3, max_steps=6, workers=1, seed=5)
    assert snapshot(tmp_path / "b3.duckdb") == snapshot(
        tmp_path / "b3-w1.duckdb"
    )  # not the worker count, not the order
    greedy, _ = _mine(tmp_path / "b1.duckdb", max_steps=6)
    assert report["beam"] == 3
    merged = 0
    for w, g1 in zip(report["workloads"], greedy["workloads"], strict=True):
        g, states, steps = _dag_facts(tmp_path / "b3.duckdb", w["workload"])
        assert nx.is_directed_acyclic_graph(g)
        assert g.number_of_nodes() == len(states) == w["states"] >= g1["states"]
        assert w["accepted"] == sum(st["accepted"] for st in steps)
        depth = {s["state_hash"]: s["depth"] for s in states}
        for st in steps:  # every accepted step ends in a recorded state, one depth further at most
            if st["accepted"]:
                assert depth[st["to_state"]] <= depth[st["from_state"]] + 1
                assert g.has_edge(st["to_state"], st["from_state"])
        # the root is the end of the taken path, at the deepest depth reached
        root, expert = g.graph["root"], g.graph["expert"]
        assert g.nodes[root]["depth"] == max(depth.values()) == w["depth"]
        taken = [(u, v) for u, v, t in g.edges(data="taken") if t]
        assert len(taken) == w["depth"] > 0 and nx.has_path(g.edge_subgraph(taken), root, expert)
        chain = lineage.taken_chain(g)
        assert chain.number_of_edges() == chain.number_of_nodes() - 1 == w["depth"]
        taken_rows = [st for st in steps if st["taken"]]
        assert len(taken_rows) == w["depth"] and all(st["carrier"] and st["roundtrip"] for st in taken_rows)
        assert not [st for st in steps if not st["taken"] and (st["carrier"] or st["roundtrip"])]
        merged += sum(1 for n in g if g.out_degree(n) > 1)  # reached from two states: orders merged
        alternatives = [d for _, _, d in g.edges(data=True) if not d["taken"]]
        assert all(d["skill"] is None for d in alternatives)
    assert merged, "the hash corpus has states reached by two orders"
    with Store(tmp_path / "b3.duckdb", read_only=True) as s:
        doc = json.loads(lineage.dump(lineage.build(s, "row_sum"), "json"))
        dot = lineage.dump(lineage.build(s, "row_sum"), "dot")
    assert {e["taken"] for e in doc["edges"]} == {True, False}
    assert "style=dashed" in dot and "style=bold" in dot and "(root)" in dot
    lineage.to_png(
        lineage.build(Store(tmp_path / "b3.duckdb", read_only=True), "row_sum"), tmp_path / "l.png"
    )
    assert (tmp_path / "l.png").stat().st_size > 1000


def test_beam_rerun_gates_nothing_recorded(tmp_path: Path) -> None:
    db = tmp_path / "s.duckdb"
    _mine(db, beam=3)
    first = snapshot(db)
    report, jobs = _mine(db, beam=3)
    assert sorted(jobs) == sorted(str(p / "expert.cu") for p in CORPUS)  # the experts' gates only
    assert snapshot(db) == first
    assert [w["workload"] for w in report["workloads"]] == NAMES


def test_beam_resumes_after_ctrl_c_and_after_a_cut(tmp_path: Path, python_sigint: None) -> None:
    """Interrupted (Ctrl-C in the driver) then re-run, and cut by --max-steps then re-run longer:
    both give the rows of an uninterrupted run."""
    seen: list[str] = []
    lock = threading.Lock()

    def hook(job: GateJob) -> None:
        with lock:
            seen.append(job.name)
            if len(seen) == 25:
                _thread.interrupt_main()

    db = tmp_path / "stopped.duckdb"
    with pytest.raises(KeyboardInterrupt):
        _mine(db, hook=hook, beam=3)
    with Store(db, read_only=True) as s:
        assert s.scalar("SELECT status FROM mining_runs") == "interrupted"
        assert s.scalar("SELECT count(*) FROM steps") > 0
    _mine(db, beam=3, seed=2)
    _mine(tmp_path / "clean.duckdb", beam=3)
    clean = snapshot(tmp_path / "clean.duckdb")
    assert snapshot(db) == clean
    cut = tmp_path / "cut.duckdb"
    _mine(cut, beam=3, max_steps=2)
    _mine(cut, beam=3, max_steps=4)
    assert snapshot(cut) == clean


def test_beam_validation(tmp_path: Path) -> None:
    with pytest.raises(KLineageError, match="--beam must be >= 1"):
        mine_corpus(CORPUS, db=tmp_path / "s.duckdb", beam=0)
    with pytest.raises(KLineageError, match="--llm works with the greedy walk only"):
        mine_corpus(CORPUS, db=tmp_path / "s.duckdb", beam=2, llm="anthropic")


def test_cli_beam_option(tmp_path: Path, monkeypatch, capsys) -> None:
    from klineage.cli import main

    scale = REPO / "tests/data/mining/scale"
    monkeypatch.setattr(
        "sys.argv", ["klineage", "mine", str(scale), "--db", str(tmp_path / "s.duckdb"), "--beam", "0"]
    )
    with pytest.raises(SystemExit) as e:
        main()
    err = capsys.readouterr().err.strip()
    assert e.value.code == 2 and err == "error: --beam must be >= 1 (got 0)"
    monkeypatch.setattr(
        "sys.argv",
        [
            "klineage",
            "mine",
            str(scale),
            "--db",
            str(tmp_path / "s.duckdb"),
            "--beam",
            "2",
            "--max-steps",
            "0",
            "--json",
        ],
    )
    with pytest.raises(SystemExit) as e:
        main()
    doc = json.loads(capsys.readouterr().out)
    assert e.value.code == 0 and doc["beam"] == 2 and doc["workloads"][0]["states"] == 1
