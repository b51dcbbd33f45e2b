"""Executors for gate runs: `local` (a thread pool on this machine) and `ray` (one Ray task per
gate run, on a local Ray instance or a cluster).

Why an interface: mining is thousands of independent gate runs, and a team with a cluster wants
them spread over it, while the walker's answer must not depend on where they ran. Both executors
take a batch of jobs and yield `(index, GateResult)` as the results complete; they submit the
jobs lazily in index order, at most `capacity` at once, so a consumer that stops early (the walker
has found the first accepted candidate in source order) wastes little. Closing the iterator
stops further submissions.

One executor serves several walks at once (`klineage mine` walks up to `workers` workloads in
threads of the driver): `run` and `gate_one` may be called from several threads concurrently.
Each run in flight gets a fair share of the capacity (capacity // runs, the remainder to the
earliest runs, at least one), so N concurrent walks keep N slots busy with the candidate each
walk needs next rather than with one walk's speculative candidates past its winner. A walk
registers for its whole length (`walking()`), and the capacity is split over the registered
walks too: a walk between two gates (finding its next candidates, writing a step) keeps its
slot, instead of the other walk filling it with a speculative candidate in the meantime. The
local executor also lets a run have more than one job in flight only where the cores allow it:
a gate runs two compilers at once (nvcc beside the backend's build), so on a 2-core machine a
speculative candidate only slowed the one the walk was waiting for (within a step the first
candidate almost always passes).

The `ray` executor keeps the content-hash cache (gates/cache.py) on the driver: it looks a job up
there first, a task gates into a private folder on its worker and returns the verdict together
with the artifact's files, and the driver writes them into its own cache, once per key. A task
whose worker dies, whose node is lost or that runs past its deadline is retried once; a second
failure is recorded as a `crash` verdict and the run goes on. Ray is an optional dependency
(`pip install klineage[ray]`), imported only when the `ray` executor is made.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import tempfile
import threading
import time
from abc import ABC, abstractmethod
from collections import deque
from collections.abc import Callable, Generator, Iterator, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from klineage.errors import KLineageError
from klineage.gates import cache
from klineage.gates.backend import GateOptions
from klineage.gates.backends import get_backend
from klineage.gates.compile import nvcc_version
from klineage.gates.gate import check_parse, gate
from klineage.gates.result import GateResult
from klineage.workload import Workload, load_workload

EXECUTORS = ("local", "ray")

#: Build products that are not shipped back from a remote task: large, and rebuilt from source.cu.
_BINARY_SUFFIXES = (".so", ".cubin", ".o", ".a", ".fatbin", ".ptx")
#: A workload folder larger than this is not shipped to remote workers (they must see the path).
_MAX_WORKLOAD_BYTES = 8 << 20


@dataclass(frozen=True)
class GateJob:
    """One gate run: the candidate's text, its workload folder, the gate options, a display name."""

    source: str
    workload_dir: Path
    options: GateOptions
    name: str

    def dedup_key(self) -> str:
        """Jobs with the same key get the same verdict (the name only labels messages)."""
        return json.dumps([self.source, str(self.workload_dir), self.options.key_fields()], sort_keys=True)


def toolchain_id(backend_name: str) -> str | None:
    """The toolchain part of the gate's cache key on this machine (as gates/gate.py builds it),
    or None when the backend cannot be loaded here."""
    try:
        backend = get_backend(backend_name)
    except KLineageError:
        return None
    return f"nvcc {nvcc_version()} | {backend.toolchain()}"


def gate_key(source: str, workload: Workload, options: GateOptions, toolchain: str) -> str:
    """The content-hash key gates/gate.py files this candidate under, for a given toolchain."""
    return cache.cache_key(source, workload.fingerprint(), options.key_fields(), toolchain)


class GateExecutor(ABC):
    """Runs batches of gate jobs; results come back as they complete, each with its index."""

    name: str = ""

    def __init__(self) -> None:
        self._workloads: dict[Path, Workload] = {}
        self._lock = threading.Lock()
        self._runs: list[object] = []  # the runs in flight, in start order (one token each)
        self._walks = 0  # walks registered with `walking()`
        self._runs_lock = threading.Lock()

    @property
    @abstractmethod
    def capacity(self) -> int:
        """Jobs in flight at once."""

    @abstractmethod
    def run(self, jobs: Sequence[GateJob]) -> Generator[tuple[int, GateResult], None, None]:
        """Yield `(index, result)` for every job, in completion order. Closing the iterator early
        submits nothing more; runs already started may finish in the background."""

    def gate_one(self, job: GateJob) -> GateResult:
        stream = self.run([job])
        try:
            return next(stream)[1]
        finally:
            stream.close()

    # ---- fair sharing between concurrent runs ------------------------------------------------
    def _enter_run(self) -> object:
        token = object()
        with self._runs_lock:
            self._runs.append(token)
        return token

    def _leave_run(self, token: object) -> None:
        with self._runs_lock:
            self._runs.remove(token)

    @contextlib.contextmanager
    def walking(self) -> Iterator[None]:
        """Register a walk for as long as it lasts: capacity is shared over the registered walks
        even while one of them has no run in flight (see the module docstring)."""
        with self._runs_lock:
            self._walks += 1
        try:
            yield
        finally:
            with self._runs_lock:
                self._walks -= 1

    def _sharers(self) -> int:
        """How many ways the capacity is split: runs in flight, or registered walks if more."""
        with self._runs_lock:
            return max(len(self._runs), self._walks, 1)

    def _share(self, token: object, capacity: int) -> int:
        """Jobs this run may have in flight now: an even split of `capacity` over the runs in
        flight (or the registered walks, if more), the remainder to the earliest runs, never
        less than one."""
        with self._runs_lock:
            n, rank = max(len(self._runs), self._walks, 1), self._runs.index(token)
        return max(1, capacity // n + (1 if rank < capacity % n else 0))

    def close(self) -> None:
        """Release the pool or the Ray instance this executor started."""
        self._workloads.clear()

    def workload(self, folder: Path) -> Workload:
        with self._lock:
            if folder not in self._workloads:
                self._workloads[folder] = load_workload(folder)
            return self._workloads[folder]

    def __enter__(self) -> GateExecutor:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


#: Processes a gate keeps busy at once while it compiles (nvcc beside the backend's build).
COMPILERS_PER_GATE = 2


class LocalExecutor(GateExecutor):
    """Gate runs on this machine, `workers` at a time. Threads suffice: every gate runs its
    compiler and its candidate in child processes. Beyond one job per run (per walk), a run
    gets more only while the machine has the cores for them: at most cores / 2 jobs in flight
    (`cores` defaults to the CPUs this process may use)."""

    name = "local"

    def __init__(self, workers: int = 2, cores: int | None = None) -> None:
        super().__init__()
        self.workers = max(1, workers)
        self.cores = max(1, cores if cores is not None else _usable_cpus())
        self._pool: ThreadPoolExecutor | None = None
        self._pool_lock = threading.Lock()

    @property
    def capacity(self) -> int:
        return self.workers

    def _gate(self, job: GateJob) -> GateResult:
        return gate(job.source, self.workload(job.workload_dir), job.options, name=job.name)

    def _useful_capacity(self) -> int:
        """The capacity shared out now: `workers`, but no more than the cores can run at once
        beyond one job per sharer (a speculative job must not slow the ones waited for)."""
        return min(self.workers, max(self._sharers(), self.cores // COMPILERS_PER_GATE))

    def _ensure_pool(self) -> ThreadPoolExecutor:
        with self._pool_lock:  # several walks' threads may start their first run at once
            if self._pool is None:
                self._pool = ThreadPoolExecutor(max_workers=self.workers, thread_name_prefix="klineage-gate")
            return self._pool

    def run(self, jobs: Sequence[GateJob]) -> Generator[tuple[int, GateResult], None, None]:
        pool = self._ensure_pool()
        todo = deque(enumerate(jobs))
        running: dict[Future[GateResult], list[int]] = {}
        by_key: dict[str, Future[GateResult]] = {}
        token = self._enter_run()
        try:
            while todo or running:
                while todo and len(running) < self._share(token, self._useful_capacity()):
                    i, job = todo.popleft()
                    dup = by_key.get(job.dedup_key())
                    if dup is not None and dup in running:
                        running[dup].append(i)
                        continue
                    fut = pool.submit(self._gate, job)
                    running[fut] = [i]
                    by_key[job.dedup_key()] = fut
                done, _ = wait(list(running), return_when=FIRST_COMPLETED)
                for fut in sorted(done, key=lambda f: running[f][0]):
                    indices = running.pop(fut)
                    result = fut.result()
                    for i in indices:
                        yield i, result
        finally:
            self._leave_run(token)
            for fut in running:
                fut.cancel()  # not started: dropped; started: finishes in its thread (cache filled)

    def close(self) -> None:
        with self._pool_lock:
            pool, self._pool = self._pool, None
        if pool is not None:
            pool.shutdown(wait=True, cancel_futures=True)
        super().close()


def _usable_cpus() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


# ---- ray ------------------------------------------------------------------------------------


@dataclass
class TaskPayload:
    """What a Ray task needs: the job, the workload folder's files (for workers that do not
    see the driver's path), the key the driver expects, and which try this is (1 or 2)."""

    source: str
    name: str
    options: GateOptions
    workload_dir: str
    workload_files: dict[str, bytes]
    expected_key: str | None
    attempt: int = 1


@dataclass
class TaskOutcome:
    """What a Ray task returns: the verdict, the key it was gated under (empty when the gate
    stopped before the cache, e.g. a parse error), and the artifact folder's files."""

    key: str
    result: dict[str, Any]
    files: dict[str, bytes] = field(default_factory=dict)
    node: str = ""


def _workload_files(folder: Path) -> dict[str, bytes]:
    files: dict[str, bytes] = {}
    total = 0
    for p in sorted(folder.rglob("*")):
        if not p.is_file() or "__pycache__" in p.parts:
            continue
        total += p.stat().st_size
        if total > _MAX_WORKLOAD_BYTES:
            return {"workload.py": (folder / "workload.py").read_bytes()}
        files[str(p.relative_to(folder))] = p.read_bytes()
    return files


def _workload_here(p: TaskPayload, scratch: Path) -> Path:
    """The driver's folder when this worker sees the same workload.py, else a private copy."""
    here = Path(p.workload_dir)
    wanted = p.workload_files.get("workload.py")
    if (here / "workload.py").is_file() and (wanted is None or (here / "workload.py").read_bytes() == wanted):
        return here
    copy = scratch / "workload" / here.name
    for rel, data in p.workload_files.items():
        dest = copy / rel
        dest.parent.mkdir(parents=True, exist_ok=True)
        dest.write_bytes(data)
    return copy


def _pack(folder: Path) -> dict[str, bytes]:
    if not folder.is_dir():
        return {}
    return {
        str(f.relative_to(folder)): f.read_bytes()
        for f in sorted(folder.rglob("*"))
        if f.is_file() and not f.name.endswith(_BINARY_SUFFIXES)
    }


def run_gate_task(p: TaskPayload) -> TaskOutcome:
    """The body of one Ray task: gate into a private cache folder (never the driver's), then
    return the verdict with the artifact's files for the driver to archive."""
    scratch = Path(tempfile.mkdtemp(prefix="klineage-task-"))
    try:
        folder = _workload_here(p, scratch)
        wl = load_workload(folder)
        root = scratch / "cache"
        result = gate(p.source, wl, p.options, name=p.name, use_cache=False, cache_root=root)
        key = ""
        if result.artifact_id:
            tool = toolchain_id(p.options.backend)
            key = gate_key(p.source, wl, p.options, tool) if tool is not None else ""
            if not key.startswith(result.artifact_id):  # cannot happen unless gate.py's key changes
                key = ""
        files = _pack(cache.artifact_dir(key, root)) if key else {}
        node = ""
        try:
            import ray

            node = ray.get_runtime_context().get_node_id()
        except Exception:  # outside Ray (direct calls in tests): no node id
            node = ""
        return TaskOutcome(key, result.to_dict(), files, node)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def probe_toolchain(backend_name: str) -> str | None:
    """Runs on a worker: that worker's toolchain id, so the driver computes the same keys."""
    return toolchain_id(backend_name)


@dataclass(eq=False)
class _Flight:
    """A submitted task and the job indices waiting on it (several when jobs repeat)."""

    job: GateJob
    key: str | None
    payload: TaskPayload
    deadline: float
    indices: list[int] = field(default_factory=list)


TaskFn = Callable[[TaskPayload], TaskOutcome]


class RayExecutor(GateExecutor):
    """Each gate run is a Ray task: `emu` tasks ask for one CPU, `cuda` tasks for one GPU.

    `address=None` starts a local Ray instance with `num_cpus` CPUs (no dashboard); an address
    connects to a running cluster. `task_timeout_s` bounds one try of a task (default: four
    times the gate's stage limit plus a minute: compile, build, run and slack). `task_fn` is the
    task body (tests substitute one that kills its worker)."""

    name = "ray"

    def __init__(
        self,
        backend: str = "emu",
        *,
        address: str | None = None,
        num_cpus: int | None = None,
        task_timeout_s: float | None = None,
        task_fn: TaskFn = run_gate_task,
        progress: Callable[[str], None] | None = None,
    ) -> None:
        super().__init__()
        try:
            import ray
        except ModuleNotFoundError:
            raise KLineageError("the ray executor needs Ray: pip install 'klineage[ray]'") from None
        self._ray = ray
        self.backend = backend
        self.owns_ray = False
        if not ray.is_initialized():
            try:
                if address:
                    ray.init(address=address, log_to_driver=False)
                else:
                    ray.init(num_cpus=num_cpus, include_dashboard=False, log_to_driver=False)
                    self.owns_ray = True
            except Exception as e:  # a bad address, no room for Ray's processes: one clear line
                where = f"join the Ray cluster at {address}" if address else "start a local Ray instance"
                raise KLineageError(
                    f"cannot {where}: {type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"
                ) from None
        self.task_timeout_s = task_timeout_s
        self.progress = progress or (lambda _msg: None)
        resources = {"num_gpus": 1, "num_cpus": 1} if backend == "cuda" else {"num_cpus": 1}
        self._remote = ray.remote(task_fn).options(max_retries=0, **resources)
        self._probe = ray.remote(probe_toolchain).options(max_retries=1, **resources)
        self._toolchains: dict[str, str | None] = {}
        self._files: dict[Path, dict[str, bytes]] = {}
        self._orphans: dict[Any, _Flight] = {}  # tasks of an abandoned run, still useful to the cache
        self._state = threading.RLock()  # the tables and counters below, shared by concurrent runs
        self.written: list[str] = []  # cache keys this driver wrote, in order (each once)
        self.submitted = 0
        self.retried = 0
        self.crashed = 0

    @property
    def capacity(self) -> int:
        res = self._ray.cluster_resources()
        slots = int(res.get("GPU", 0) if self.backend == "cuda" else res.get("CPU", 0))
        if slots < 1:
            what = "GPU" if self.backend == "cuda" else "CPU"
            raise KLineageError(f"the Ray cluster has no {what} for the {self.backend} backend")
        return slots

    # ---- driver-side cache ------------------------------------------------------------------
    def _toolchain(self, backend: str) -> str | None:
        with self._state:
            if backend not in self._toolchains:
                self._toolchains[backend] = self._ray.get(self._probe.remote(backend))
            return self._toolchains[backend]

    def _key(self, job: GateJob) -> str | None:
        tool = self._toolchain(job.options.backend)
        return gate_key(job.source, self.workload(job.workload_dir), job.options, tool) if tool else None

    def _archive(self, outcome: TaskOutcome, result: GateResult) -> None:
        """Write a remote verdict and its files into this driver's cache, unless already there."""
        with self._state:  # one thread archives a key; `written` lists each key once
            self._archive_locked(outcome, result)

    def _archive_locked(self, outcome: TaskOutcome, result: GateResult) -> None:
        key = outcome.key
        if not key or cache.load_cached(key) is not None:
            return
        d = cache.fresh_dir(key)  # private staging folder, published by cache.store
        for rel, data in outcome.files.items():
            if rel == "result.json":
                continue  # written last, by cache.store, so a partial folder never looks finished
            dest = (d / rel).resolve()
            if d.resolve() not in dest.parents:
                continue
            dest.parent.mkdir(parents=True, exist_ok=True)
            dest.write_bytes(data)
        cache.store(key, result, staging=d)
        self.written.append(key)

    # ---- tasks ------------------------------------------------------------------------------
    def _deadline(self, options: GateOptions) -> float:
        limit = self.task_timeout_s if self.task_timeout_s is not None else 4 * options.timeout_s + 60
        return time.monotonic() + limit

    def _submit(self, flight: _Flight) -> Any:
        flight.deadline = self._deadline(flight.job.options)
        with self._state:
            self.submitted += 1
        return self._remote.remote(flight.payload)

    def _payload(self, job: GateJob, key: str | None) -> TaskPayload:
        folder = job.workload_dir
        with self._state:
            if folder not in self._files:
                self._files[folder] = _workload_files(folder)
            files = self._files[folder]
        return TaskPayload(job.source, job.name, job.options, str(folder), files, key)

    def _failed(self, ref: Any, flight: _Flight, why: str, table: dict[Any, _Flight]) -> GateResult | None:
        """A try failed for a system reason: resubmit once (a new worker), else a crash verdict."""
        if flight.payload.attempt < 2:
            with self._state:
                self.retried += 1
            self.progress(f"{flight.job.name}: gate task failed ({why}); retrying once")
            flight.payload.attempt += 1
            table[self._submit(flight)] = flight
            return None
        with self._state:
            self.crashed += 1
        return GateResult.reject(
            "run",
            "crash",
            f"{flight.job.name}: the gate task failed twice, the last time: {why}",
            backend=flight.job.options.backend,
        )

    def _collect(self, ref: Any, flight: _Flight, table: dict[Any, _Flight]) -> GateResult | None:
        """The verdict of a finished task (archived on the driver), or None when it was retried."""
        ray = self._ray
        try:
            outcome: TaskOutcome = ray.get(ref)
        except ray.exceptions.RayTaskError as e:
            raise e.as_instanceof_cause() from None  # the gate itself raised: as it would locally
        except ray.exceptions.RayError as e:
            return self._failed(
                ref, flight, f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}", table
            )
        result = GateResult.from_dict(outcome.result)
        self._archive(outcome, result)
        return result

    def _expire(self, table: dict[Any, _Flight]) -> list[tuple[_Flight, GateResult]]:
        """Cancel tries past their deadline; retry them once, else return their crash verdicts."""
        now = time.monotonic()
        out: list[tuple[_Flight, GateResult]] = []
        for ref, flight in list(table.items()):
            if flight.deadline > now:
                continue
            del table[ref]
            self._ray.cancel(ref, force=True)
            limit = (
                self.task_timeout_s
                if self.task_timeout_s is not None
                else 4 * flight.job.options.timeout_s + 60
            )
            r = self._failed(ref, flight, f"no result within {limit:g} s", table)
            if r is not None:
                out.append((flight, r))
        return out

    def _harvest_orphans(self, block: bool = False) -> None:
        """Archive the verdicts of tasks an earlier, abandoned run left in flight (one thread at
        a time: the orphans are shared by every run)."""
        with self._state:
            self._harvest_orphans_locked(block)

    def _harvest_orphans_locked(self, block: bool) -> None:
        if not self._orphans:
            return
        refs = list(self._orphans)
        ready, _ = self._ray.wait(refs, num_returns=len(refs), timeout=None if block else 0)
        for ref in ready:
            flight = self._orphans.pop(ref)
            try:
                self._collect(ref, flight, self._orphans)
            except Exception as e:  # an orphan's failure belongs to no caller: note it, move on
                self.progress(f"{flight.job.name}: abandoned gate task failed: {e}")
        for flight, _r in self._expire(self._orphans):
            self.progress(f"{flight.job.name}: abandoned gate task dropped")

    def run(self, jobs: Sequence[GateJob]) -> Generator[tuple[int, GateResult], None, None]:
        ray = self._ray
        self._harvest_orphans()
        todo = deque(enumerate(jobs))
        table: dict[Any, _Flight] = {}
        by_key: dict[str, _Flight] = {}
        capacity = self.capacity
        token = self._enter_run()
        try:
            while todo or table:
                while todo and len(table) < self._share(token, capacity):
                    i, job = todo.popleft()
                    dk = job.dedup_key()
                    if dk in by_key and any(f is by_key[dk] for f in table.values()):
                        by_key[dk].indices.append(i)
                        continue
                    if check_parse(job.source, job.name) is not None:
                        yield i, gate(job.source, self.workload(job.workload_dir), job.options, name=job.name)
                        continue  # rejected before the cache: cheap, done here
                    key = self._key(job)
                    hit = cache.load_cached(key) if key else None
                    if hit is not None:
                        yield i, hit
                        continue
                    with self._state:  # the orphans are shared with other runs
                        adopted = next((r for r, f in self._orphans.items() if key and f.key == key), None)
                        orphan = self._orphans.pop(adopted) if adopted is not None else None
                    if orphan is not None:
                        flight = orphan
                        flight.job, flight.indices = job, [i]
                        table[adopted] = flight
                    else:
                        flight = _Flight(job, key, self._payload(job, key), 0.0, [i])
                        table[self._submit(flight)] = flight
                    by_key[dk] = flight
                if not table:
                    continue
                soonest = min(f.deadline for f in table.values())
                ready, _ = ray.wait(
                    list(table), num_returns=1, timeout=max(0.05, min(5.0, soonest - time.monotonic()))
                )
                finished: list[tuple[_Flight, GateResult]] = []
                for ref in ready:
                    flight = table.pop(ref)
                    r = self._collect(ref, flight, table)
                    if r is not None:
                        finished.append((flight, r))
                finished += self._expire(table)
                for flight, r in sorted(finished, key=lambda fr: fr[0].indices[0]):
                    for i in flight.indices:
                        yield i, r
        finally:
            self._leave_run(token)
            with self._state:
                self._orphans.update(table)  # not cancelled: their verdicts still fill the cache

    def close(self) -> None:
        try:
            if self._orphans and self._ray.is_initialized():
                self._harvest_orphans(block=True)
        finally:
            if self.owns_ray and self._ray.is_initialized():
                self._ray.shutdown()
                self.owns_ray = False
            super().close()


def make_executor(
    name: str = "local",
    *,
    workers: int = 2,
    backend: str = "emu",
    address: str | None = None,
    progress: Callable[[str], None] | None = None,
) -> GateExecutor:
    """The executor named on the command line. `ray` without an address starts a local Ray
    instance with `workers` CPUs."""
    if name == "local":
        if address:
            raise KLineageError("--address is for the ray executor")
        return LocalExecutor(workers)
    if name == "ray":
        os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")  # no network: never phone home
        return RayExecutor(backend, address=address, num_cpus=None if address else workers, progress=progress)
    raise KLineageError(f"unknown executor '{name}' (known: {', '.join(EXECUTORS)})")
