"""Gate executors (issue 14): the walker's choice does not depend on the executor, `local` and
`ray` mine identical rows, and a Ray task that dies or hangs is retried once, then a `crash`."""

from __future__ import annotations

import os
import sys
import threading
import time
import zlib
from collections.abc import Generator, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import pytest

from klineage.executor import (
    GateExecutor,
    GateJob,
    LocalExecutor,
    RayExecutor,
    TaskOutcome,
    TaskPayload,
    make_executor,
    run_gate_task,
)
from klineage.gates import cache
from klineage.gates.backend import GateOptions
from klineage.gates.result import GateResult
from klineage.mining import mine_corpus
from klineage.store.db import Store
from klineage.walker import Attempt, WalkConfig, Walker, WalkSummary
from klineage.workload import load_workload
from tests.conftest import REPO

CORPUS = REPO / "tests/data/mining"
SCALE = CORPUS / "scale"
EXPERT = (SCALE / "expert.cu").read_text()


# ---- the walker's choice, with scripted verdicts ---------------------------------------------


def _ok() -> GateResult:
    return GateResult(accepted=True, stage="done", category="ok")


def _no(category: str) -> GateResult:
    return GateResult.reject("correctness" if category == "mismatch" else "run", category, category)


class ScriptedExecutor(GateExecutor):
    """Yields fixed verdicts in a fixed completion order (indices beyond the batch skipped)."""

    name = "scripted"

    def __init__(self, verdicts: list[GateResult], order: list[int]) -> None:
        super().__init__()
        self.verdicts, self.order = verdicts, order
        self.yielded: list[int] = []

    @property
    def capacity(self) -> int:
        return len(self.verdicts)

    def run(self, jobs: Sequence[GateJob]) -> Generator[tuple[int, GateResult], None, None]:
        for i in self.order:
            if i < len(jobs):
                self.yielded.append(i)
                yield i, self.verdicts[i]


@dataclass
class _Site:
    line: int


def _attempts(n: int) -> list[Attempt]:
    refused = Attempt("r", "restrict", _Site(1), "refused", "no site", False)  # type: ignore[arg-type]
    return [refused] + [
        Attempt(f"s{i}", "op", _Site(i), "pending", "", False, f"// {i}\n")  # type: ignore[arg-type]
        for i in range(n)
    ]


def test_first_accepted_in_source_order_wins(tmp_path: Path) -> None:
    """Verdicts arrive last-first; the winner is still the first accepted in source order, the
    candidates before it are recorded (a crash among them), the ones after it stay pending."""
    verdicts = [_no("mismatch"), _no("crash"), _ok(), _ok()]
    ex = ScriptedExecutor(verdicts, order=[3, 2, 1, 0])
    walker = Walker(Store(tmp_path / "s.duckdb"), WalkConfig(), executor=ex)
    attempts, summary = _attempts(4), WalkSummary("scale_test")
    (chosen,) = walker._gate_until(load_workload(SCALE), attempts, 1, summary)
    assert chosen is attempts[3]
    assert [a.category for a in attempts] == ["refused", "mismatch", "crash", "ok", "pending"]
    assert attempts[4].result is None and summary.gate_runs == 3
    assert ex.yielded == [3, 2, 1, 0]  # it needed every verdict up to the winner, then stopped


def test_no_accepted_candidate_records_every_verdict(tmp_path: Path) -> None:
    ex = ScriptedExecutor([_no("timeout"), _no("crash")], order=[1, 0])
    walker = Walker(Store(tmp_path / "s.duckdb"), WalkConfig(), executor=ex)
    attempts, summary = _attempts(2), WalkSummary("scale_test")
    assert walker._gate_until(load_workload(SCALE), attempts, 1, summary) == []
    assert [a.category for a in attempts[1:]] == ["timeout", "crash"] and summary.rejected == 0


# ---- the local executor ----------------------------------------------------------------------


class SleepyLocal(LocalExecutor):
    """A local executor whose 'gate' sleeps as long as the source says, and counts its calls and
    how many ran at once. Its gates use no CPU: unless a test says otherwise, it acts as if the
    machine had cores to spare."""

    def __init__(self, workers: int, cores: int = 64) -> None:
        super().__init__(workers, cores=cores)
        self.calls: list[str] = []
        self._calls_lock = threading.Lock()
        self.now = self.most = 0

    def _gate(self, job: GateJob) -> GateResult:
        with self._calls_lock:
            self.calls.append(job.source)
            self.now += 1
            self.most = max(self.most, self.now)
        try:
            time.sleep(float(job.source.split()[0]))
        finally:
            with self._calls_lock:
                self.now -= 1
        return GateResult.reject("run", "mismatch", job.source) if "bad" in job.source else _ok()


def _jobs(sources: list[str]) -> list[GateJob]:
    return [GateJob(s, SCALE, GateOptions(), f"j{i}.cu") for i, s in enumerate(sources)]


def test_local_yields_as_completed_with_indices_and_gates_duplicates_once() -> None:
    with SleepyLocal(workers=2) as ex:
        out = list(ex.run(_jobs(["0.3 a", "0.0 bad", "0.3 a", "0.05 c"])))
    assert sorted(i for i, _ in out) == [0, 1, 2, 3]
    assert [i for i, _ in out][0] == 1  # the quick one came back first
    assert sorted(ex.calls) == ["0.0 bad", "0.05 c", "0.3 a"]  # index 2 repeats index 0
    assert {i: r.category for i, r in out} == {0: "ok", 1: "mismatch", 2: "ok", 3: "ok"}


@pytest.mark.parametrize(("cores", "most"), [(1, 1), (2, 1), (3, 1), (4, 2), (64, 2)])
def test_local_runs_a_second_job_only_with_cores_to_spare(cores: int, most: int) -> None:
    """A gate compiles with two processes at once: a lone run on a 2-core machine gets one job
    in flight (a speculative second one only slowed the first); with 4 cores it gets both."""
    with SleepyLocal(workers=2, cores=cores) as ex:
        out = list(ex.run(_jobs(["0.1 a", "0.1 b", "0.1 c", "0.1 d"])))
    assert sorted(i for i, _ in out) == [0, 1, 2, 3]
    assert ex.most == most


def test_registered_walks_keep_their_share_between_runs() -> None:
    """A walk registered with `walking()` keeps its part of the capacity while it has no run in
    flight (between two gates), so the other walk does not fill it with a speculative job."""
    ex = LocalExecutor(workers=2, cores=64)
    token = ex._enter_run()
    assert ex._share(token, 2) == 2  # alone
    with ex.walking():
        assert ex._share(token, 2) == 2  # its own walk
        with ex.walking():
            assert ex._share(token, 2) == 1  # the other walk is between gates: its slot stays free
            assert ex._useful_capacity() == 2
        assert ex._share(token, 2) == 2
    ex._leave_run(token)
    assert ex._walks == 0 and LocalExecutor(workers=2, cores=2)._useful_capacity() == 1


def test_a_walk_between_gates_keeps_its_slot(tmp_path: Path) -> None:
    """Walk A is between two gates (no run in flight) while walk B gates three steps, each
    taking its first verdict as the walker does when the first candidate passes: B submits one
    job per step, not a speculative second one into A's slot."""
    with SleepyLocal(workers=2) as ex:
        with ex.walking():  # walk A: finding its next candidates
            with ex.walking():  # walk B
                for step in range(3):
                    stream = ex.run(_jobs([f"0.05 b{step}{k}" for k in range(3)]))
                    next(stream)
                    stream.close()
        time.sleep(0.1)
    assert sorted(ex.calls) == ["0.05 b00", "0.05 b10", "0.05 b20"]


def test_local_stops_submitting_when_the_consumer_stops() -> None:
    with SleepyLocal(workers=1) as ex:
        stream = ex.run(_jobs([f"0.01 {i}" for i in range(10)]))
        assert next(stream)[0] == 0
        stream.close()
    assert len(ex.calls) <= 2


# ---- ray ---------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def ray_cluster() -> Iterator[None]:
    """One local Ray instance for the module (2 CPUs, no dashboard), as `mine --executor ray` starts."""
    ray = pytest.importorskip("ray")
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    if not ray.is_initialized():
        ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, object_store_memory=200 << 20)
    ray.cloudpickle.register_pickle_by_value(sys.modules[__name__])  # the flaky task bodies below
    yield
    ray.shutdown()


def kill_first_try_of_marked(p: TaskPayload) -> TaskOutcome:
    """The worker process dies mid-task on the first try of sources marked 'die-once', on every
    try of 'die-always', and hangs on 'hang'."""
    if "die-always" in p.source or ("die-once" in p.source and p.attempt == 1):
        os._exit(1)
    if "hang" in p.source:
        time.sleep(3600)
    return run_gate_task(p)


def kill_first_try_of_a_third(p: TaskPayload) -> TaskOutcome:
    """Kills the worker on the first try of about a third of the candidates (chosen by content)."""
    if p.attempt == 1 and zlib.crc32(p.source.encode()) % 3 == 0:
        os._exit(1)
    return run_gate_task(p)


def _marked(tag: str) -> str:
    return f"// {tag}\n{EXPERT}"


def test_ray_worker_killed_mid_task_is_retried_then_a_crash(
    ray_cluster: None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("KLINEAGE_HOME", str(tmp_path / "home"))
    ex = RayExecutor("emu", task_fn=kill_first_try_of_marked)
    jobs = _jobs([_marked("die-once"), _marked("die-always"), "not cuda at all {"])
    got = dict(ex.run(jobs))
    assert got[0].accepted, got[0].message  # second try, on a new worker, gave the real verdict
    assert got[1].category == "crash" and got[1].stage == "run" and "failed twice" in got[1].message
    assert "WorkerCrashedError" in got[1].message
    assert got[2].category == "parse_error"  # rejected on the driver, before any task
    assert (ex.retried, ex.crashed, ex.submitted) == (2, 1, 4)
    # the driver archived the verdict and its files, once; the crash left no cache entry
    assert len(ex.written) == len(set(ex.written)) == 1
    (key,) = ex.written
    folder = cache.artifact_dir(key)
    assert {"source.cu", "result.json", "run/child.stderr"} <= {
        str(f.relative_to(folder)) for f in folder.rglob("*")
    }
    assert (folder / "source.cu").read_text() == jobs[0].source
    assert not any(f.suffix == ".so" for f in folder.rglob("*"))
    # a re-run on the driver gates nothing again, and nothing is written twice
    again = dict(ex.run(jobs[:1]))
    assert again[0].cached and again[0].accepted and ex.submitted == 4 and ex.written == [key]


def test_ray_task_past_its_deadline_is_retried_then_a_crash(
    ray_cluster: None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("KLINEAGE_HOME", str(tmp_path / "home"))
    ex = RayExecutor("emu", task_fn=kill_first_try_of_marked, task_timeout_s=4)
    t0 = time.monotonic()
    ((i, r),) = list(ex.run(_jobs([_marked("hang")])))
    assert i == 0 and r.category == "crash" and "no result within 4 s" in r.message
    assert ex.retried == 1 and ex.written == [] and time.monotonic() - t0 < 60


def _rows(db: Path) -> dict[str, list]:
    with Store(db, read_only=True) as s:
        return {
            "states": sorted((r["state_hash"], r["depth"]) for r in s.rows("SELECT * FROM states")),
            "steps": sorted(
                (
                    r["step_id"],
                    r["to_state"] or "",
                    r["accepted"],
                    r["category"],
                    r["message"] or "",
                    r["taken"],
                    str(r["roundtrip_ok"]),
                    r["carrier"] or "",
                    r["gate_key"] or "",
                )
                for r in s.rows("SELECT * FROM steps")
            ),
            "gate_runs": sorted(
                (r["gate_key"], r["accepted"], r["category"], r["message"] or "")
                for r in s.rows("SELECT * FROM gate_runs")
            ),
            "kernels": sorted(r["kernel_hash"] for r in s.rows("SELECT kernel_hash FROM kernels")),
            "skills": sorted((r["skill_id"], r["operator"]) for r in s.rows("SELECT * FROM skills")),
        }


def test_ray_and_local_mine_identical_rows(
    ray_cluster: None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Cold caches both; the Ray run loses a worker on the first try of about a third of its
    tasks and still stores exactly the local run's rows. Its driver cache is then complete."""
    monkeypatch.setenv("KLINEAGE_HOME", str(tmp_path / "home-local"))
    local = mine_corpus([CORPUS], db=tmp_path / "local.duckdb", workers=2)
    monkeypatch.setenv("KLINEAGE_HOME", str(tmp_path / "home-ray"))
    ex = RayExecutor("emu", task_fn=kill_first_try_of_a_third)
    remote = mine_corpus([CORPUS], db=tmp_path / "ray.duckdb", workers=2, executor=ex)
    assert ex.retried > 0 and ex.crashed == 0
    assert len(ex.written) == len(set(ex.written))  # never a cache entry written twice
    rows = _rows(tmp_path / "ray.duckdb")
    assert rows == _rows(tmp_path / "local.duckdb")
    assert len(rows["skills"]) >= 3 and len(rows["steps"]) >= 3
    (lw,), (rw,) = local["workloads"], remote["workloads"]
    assert {k: lw[k] for k in ("states", "accepted", "rejected", "refused", "gate_runs", "skills")} == {
        k: rw[k] for k in ("states", "accepted", "rejected", "refused", "gate_runs", "skills")
    }
    # the driver's cache holds every verdict: a local re-run on it gates nothing
    again = mine_corpus([CORPUS], db=tmp_path / "again.duckdb", workers=2)
    (aw,) = again["workloads"]
    assert aw["gate_runs"] == aw["cached_gates"] > 0
    assert _rows(tmp_path / "again.duckdb")["steps"] == rows["steps"]


def test_make_executor_names(tmp_path: Path) -> None:
    from klineage.errors import KLineageError

    assert isinstance(make_executor("local", workers=3), LocalExecutor)
    with pytest.raises(KLineageError, match="unknown executor"):
        make_executor("dask")
    with pytest.raises(KLineageError, match="--address is for the ray executor"):
        make_executor("local", address="127.0.0.1:6379")
    with pytest.raises(KLineageError, match="unknown executor"):  # before any gate; the run is marked failed
        mine_corpus([CORPUS], db=tmp_path / "s.duckdb", executor="dask")
    with Store(tmp_path / "s.duckdb", read_only=True) as s:
        assert [r["status"] for r in s.rows("SELECT status FROM mining_runs")] == ["failed"]
