"""Concurrent walks (`mine_corpus` walks up to `workers` workloads at once): the stored rows and
the summary order do not depend on the worker count or on which walk finishes first; a walk that
raises does not stop the others; Ctrl-C stops every walk and a re-run resumes. The gate is a
stand-in here (a verdict decided by the candidate's hash, returned in a shuffled order after a
random delay), so these tests exercise the scheduling, not the emulator."""

from __future__ import annotations

import _thread
import hashlib
import importlib.util
import random
import sys
import threading
import time
from collections.abc import Generator, Sequence
from pathlib import Path

import pytest

from klineage.executor import GateExecutor, GateJob, LocalExecutor
from klineage.gates.backend import GateOptions
from klineage.gates.result import GateResult
from klineage.mining import mine_corpus
from klineage.store.db import Store
from tests.conftest import REPO

_spec = importlib.util.spec_from_file_location("scale_bench", REPO / "benchmarks/scale_bench.py")
assert _spec is not None and _spec.loader is not None
scale_bench = importlib.util.module_from_spec(_spec)
sys.modules["scale_bench"] = scale_bench  # its dataclasses look their module up there
_spec.loader.exec_module(scale_bench)
snapshot = scale_bench.snapshot

#: three workloads, corpus order = this order (not sorted by workload name)
CORPUS = [REPO / "tests/data/mining/scale", REPO / "examples/vector_add", REPO / "examples/row_sum"]
NAMES = ["scale_test", "vector_add", "row_sum"]


def verdict(job: GateJob) -> GateResult:
    """Experts pass; any other candidate passes unless its hash says otherwise (about 1 in 4 fails)."""
    h = hashlib.sha256(f"{job.workload_dir.name}\0{job.source}".encode()).hexdigest()
    if job.name.endswith("expert.cu") or int(h[:2], 16) % 4:
        return GateResult(accepted=True, stage="done", category="ok", artifact_id=h[:16])
    return GateResult(
        accepted=False, stage="correctness", category="mismatch", message=f"hash {h[:6]}", artifact_id=h[:16]
    )


class HashExecutor(GateExecutor):
    """Verdicts by hash, yielded in a shuffled order after a short random sleep; notes how many
    runs (walks) were in flight at once. `hook(job)` runs before each verdict (tests raise or
    interrupt there)."""

    name = "hash"

    def __init__(self, workers: int, seed: int = 0, hook: object = None) -> None:
        super().__init__()
        self.workers = workers
        self.rng = random.Random(seed)
        self.rng_lock = threading.Lock()
        self.hook = hook
        self.in_flight = 0
        self.most_in_flight = 0
        self.count_lock = threading.Lock()

    @property
    def capacity(self) -> int:
        return self.workers

    def _sleep(self) -> None:
        with self.rng_lock:
            t = self.rng.uniform(0.0, 0.01)
        time.sleep(t)

    def run(self, jobs: Sequence[GateJob]) -> Generator[tuple[int, GateResult], None, None]:
        token = self._enter_run()
        with self.count_lock:
            self.in_flight += 1
            self.most_in_flight = max(self.most_in_flight, self.in_flight)
        try:
            order = list(range(len(jobs)))
            with self.rng_lock:
                self.rng.shuffle(order)
            self._sleep()
            for i in order:
                if callable(self.hook):
                    self.hook(jobs[i])
                self._sleep()
                yield i, verdict(jobs[i])
        finally:
            with self.count_lock:
                self.in_flight -= 1
            self._leave_run(token)


def _mine(
    db: Path, workers: int, seed: int = 0, hook: object = None, max_steps: int = 4
) -> tuple[dict, HashExecutor]:
    ex = HashExecutor(workers, seed, hook)
    report = mine_corpus(CORPUS, db=db, workers=workers, max_steps=max_steps, executor=ex)
    return report, ex


def test_rows_and_order_do_not_depend_on_the_worker_count(tmp_path: Path) -> None:
    one, ex1 = _mine(tmp_path / "w1.duckdb", workers=1)
    three, ex3 = _mine(tmp_path / "w3.duckdb", workers=3, seed=7)
    assert ex1.most_in_flight == 1
    assert ex3.most_in_flight >= 2  # walks overlapped
    first = snapshot(tmp_path / "w1.duckdb")
    assert first["steps"] and first["skills"]
    assert snapshot(tmp_path / "w3.duckdb") == first
    assert [w["workload"] for w in one["workloads"]] == NAMES == [w["workload"] for w in three["workloads"]]
    keys = ("states", "accepted", "rejected", "refused", "gate_runs", "skills")
    assert [{k: w[k] for k in keys} for w in one["workloads"]] == [
        {k: w[k] for k in keys} for w in three["workloads"]
    ]
    with Store(tmp_path / "w3.duckdb", read_only=True) as s:  # skills merged across lineages identically
        a = s.rows("SELECT skill_id, evidence, scope, provenance FROM skills ORDER BY skill_id")
    with Store(tmp_path / "w1.duckdb", read_only=True) as s:
        assert s.rows("SELECT skill_id, evidence, scope, provenance FROM skills ORDER BY skill_id") == a


def test_walks_are_registered_with_the_executor_while_they_run(tmp_path: Path) -> None:
    """Every gate job of a mine comes from a walk registered with the executor (`walking()`),
    so the capacity is split over the walks; none stays registered after the mine."""
    seen: list[int] = []
    holder: dict[str, HashExecutor] = {}

    def hook(job: GateJob) -> None:
        seen.append(holder["ex"]._walks)

    ex = HashExecutor(2, 0, hook)
    holder["ex"] = ex
    mine_corpus(CORPUS, db=tmp_path / "s.duckdb", workers=2, max_steps=2, executor=ex)
    assert seen and min(seen) >= 1 and max(seen) <= 2
    assert ex._walks == 0


def test_a_failing_walk_does_not_stop_the_others(tmp_path: Path) -> None:
    def hook(job: GateJob) -> None:
        if job.workload_dir.name == "vector_add" and not job.name.endswith("expert.cu"):
            raise RuntimeError("executor lost vector_add")

    with pytest.raises(RuntimeError, match="executor lost vector_add"):
        _mine(tmp_path / "s.duckdb", workers=3, hook=hook)
    clean, _ = _mine(tmp_path / "clean.duckdb", workers=1)
    with Store(tmp_path / "s.duckdb", read_only=True) as s:
        depths = {
            r["workload"]: r["d"]
            for r in s.rows("SELECT workload, max(depth) AS d FROM states GROUP BY workload")
        }
        status = s.scalar("SELECT status FROM mining_runs")
        skills = {w for r in s.rows("SELECT scope FROM skills") for w in r["scope"]["workloads"]}
    assert status == "failed"
    states = {w["workload"]: w["states"] for w in clean["workloads"]}
    assert depths["scale_test"] == states["scale_test"] - 1 and depths["row_sum"] == states["row_sum"] - 1
    assert depths["vector_add"] == 0  # only its expert
    assert {"scale_test", "row_sum"} <= skills and "vector_add" not in skills


def test_ctrl_c_stops_every_walk_and_a_rerun_resumes(tmp_path: Path, python_sigint: None) -> None:
    seen = []
    lock = threading.Lock()

    def hook(job: GateJob) -> None:
        with lock:
            seen.append(job.name)
            if len(seen) == 6:
                _thread.interrupt_main()  # as Ctrl-C: KeyboardInterrupt in the driver's main thread
        if len(seen) >= 6:
            time.sleep(0.05)

    db = tmp_path / "s.duckdb"
    t0 = time.monotonic()
    with pytest.raises(KeyboardInterrupt):
        _mine(db, workers=3, hook=hook)
    assert time.monotonic() - t0 < 30
    assert not [t for t in threading.enumerate() if t.name.startswith("klineage-walk")]  # all walks ended
    with Store(db, read_only=True) as s:
        assert s.scalar("SELECT status FROM mining_runs") == "interrupted"
    report, _ = _mine(db, workers=3, seed=3)  # resumes: the committed steps are not walked again
    assert [w["workload"] for w in report["workloads"]] == NAMES
    _mine(tmp_path / "clean.duckdb", workers=1)
    assert snapshot(db) == snapshot(tmp_path / "clean.duckdb")


def test_local_executor_serves_concurrent_runs() -> None:
    """Two threads run batches through one local executor at once: every index comes back once,
    with its own verdict."""

    class Echo(LocalExecutor):
        def _gate(self, job: GateJob) -> GateResult:
            time.sleep(0.01)
            return GateResult(accepted=False, stage="correctness", category="mismatch", message=job.source)

    out: dict[str, list[int]] = {}
    with Echo(workers=2) as ex:

        def go(who: str) -> None:
            jobs = [
                GateJob(f"{who} {i}", REPO / "examples/vector_add", GateOptions(), f"{who}/{i}.cu")
                for i in range(8)
            ]
            out[who] = sorted(i for i, r in ex.run(jobs) if r.message == f"{who} {i}")

        threads = [threading.Thread(target=go, args=(w,)) for w in ("a", "b", "c")]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    assert out == {w: list(range(8)) for w in ("a", "b", "c")}


def test_capacity_is_shared_fairly_between_runs() -> None:
    ex = LocalExecutor(workers=14)
    tokens = [ex._enter_run() for _ in range(4)]
    assert [ex._share(t, 14) for t in tokens] == [4, 4, 3, 3]  # 14 over 4 runs, remainder to the earliest
    ex._leave_run(tokens[0])
    assert [ex._share(t, 14) for t in tokens[1:]] == [5, 5, 4]
    more = [ex._enter_run() for _ in range(20)]
    assert min(ex._share(t, 14) for t in more) == 1  # more runs than workers: one each, never none
