"""`klineage mine`: walk every expert kernel of a corpus, then extract and merge skills.

Up to `workers` workloads are walked at once, each in a thread of the driver, all submitting their
gate jobs to the one executor (which shares its capacity fairly between them): within one step the
first candidate usually passes, so a single walk leaves most workers idle. The store is written
only by the driver; its lock serializes the walks' transactions, and each step still commits
alone. Skills are extracted and merged after every walk has finished, in corpus order, so the
stored rows do not depend on the worker count, the executor or which walk finished first; the
summary lists the workloads in corpus order too. A walk that raises does not stop the others:
they finish, their skills are stored, then the first error (in corpus order) is raised. Ctrl-C
stops every walk at its next gate verdict; what was committed stays, and a re-run resumes.
"""

from __future__ import annotations

import contextlib
import threading
import time
import uuid
from collections.abc import Callable
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.progress import Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

from klineage.errors import KLineageError
from klineage.executor import GateExecutor, make_executor
from klineage.gates.backend import GateOptions
from klineage.skills import extract_skills, upsert
from klineage.store import runs
from klineage.store.db import Store
from klineage.store.skills import count_skills
from klineage.walker import WalkConfig, Walker, WalkSummary, find_workloads
from klineage.workload import load_workload


def mine_corpus(
    dirs: list[Path],
    db: Path | None = None,
    backend: str = "emu",
    max_steps: int = 48,
    workers: int = 2,
    roundtrip: bool = True,
    timeout_s: float = 120.0,
    console: Console | None = None,
    executor: str | GateExecutor = "local",
    address: str | None = None,
    llm: str | None = None,
    llm_model: str | None = None,
    llm_max_cost: float | None = None,
    llm_attempts: int = 2,
    beam: int = 1,
    llm_timeout_s: float | None = None,
) -> dict[str, Any]:
    """Mine every workload under `dirs` into the store; returns the summary report.

    `executor` is `local` (a pool of `workers` on this machine), `ray` (Ray tasks; a local Ray
    instance with `workers` CPUs unless `address` names a cluster) or an executor object, which
    the caller keeps and closes. Up to `workers` walks run at once, in threads; the store is
    written only here, on the driver. `beam` > 1 walks each workload as a beam search of that
    width (klineage/walker.py) instead of greedily."""
    t0 = time.perf_counter()
    if beam < 1:
        raise KLineageError(f"--beam must be >= 1 (got {beam})")
    if beam > 1 and llm is not None:
        raise KLineageError("--llm works with the greedy walk only (--beam 1)")
    folders = find_workloads(dirs)
    workloads = {f: load_workload(f) for f in folders}  # bad workload.py: one clear error before any work
    store = Store(db)
    runs.interrupt_stale_mining_runs(store)  # a run killed with -9 left its row `running`
    run_id = uuid.uuid4().hex[:12]
    args = {
        "dirs": [str(d) for d in dirs],
        "backend": backend,
        "max_steps": max_steps,
        "workers": workers,
        "beam": beam,
        "executor": executor if isinstance(executor, str) else executor.name,
    }
    llm_operator = None
    if llm is not None:
        from klineage.deopt.llm_operator import LLMOperator
        from klineage.llm import get_llm
        from klineage.llm.record import store_recorder

        try:  # a bad --llm-model or a missing key: exit 2 before the run's row is written
            provider = get_llm(
                llm,
                model=llm_model,
                max_cost_usd=llm_max_cost,
                recorder=store_recorder(store, run_id=run_id),
                timeout_s=llm_timeout_s,
            )
        except BaseException:
            store.close()
            raise
        llm_operator = LLMOperator(provider)
    runs.start_mining_run(store, run_id, args)
    config = WalkConfig(
        options=GateOptions(backend=backend, timeout_s=timeout_s),
        max_steps=max_steps,
        workers=workers,
        roundtrip=roundtrip,
        llm=llm_operator,
        llm_attempts=llm_attempts,
        beam=beam,
    )
    results: list[dict[str, Any]] = []
    pool: GateExecutor | None = None
    stop = threading.Event()
    try:
        pool = (
            executor
            if isinstance(executor, GateExecutor)
            else make_executor(executor, workers=workers, backend=backend, address=address)
        )
        with _progress(console) as progress:
            tasks = [
                progress.add_task(f"{f.name}: waiting", total=None) if progress else None for f in folders
            ]

            def walk_one(i: int) -> WalkSummary:
                def note(msg: str, task: Any = tasks[i]) -> None:
                    if progress is not None:
                        progress.update(task, description=msg[:100])

                return Walker(store, config, note, executor=pool, stop=stop).walk(folders[i])

            outcomes = _walk_all(len(folders), walk_one, workers, stop, order=_longest_first(folders))
            failure: BaseException | None = None
            for i, (folder, outcome) in enumerate(zip(folders, outcomes, strict=True)):
                if isinstance(outcome, BaseException):  # the others went on; raised below
                    failure = failure or outcome
                    if progress is not None:
                        progress.update(tasks[i], description=f"{folder.name}: failed: {outcome}"[:100])
                    continue
                # after every walk, in corpus order: merges never depend on which walk ended first
                skills = (
                    upsert(store, extract_skills(store, workloads[folder])) if not outcome.skipped else []
                )
                if progress is not None:
                    done = outcome.skipped or f"{outcome.accepted} steps, {len(set(skills))} skills"
                    progress.update(tasks[i], description=f"{folder.name}: {done[:90]}")
                results.append({**outcome.__dict__, "skills": sorted(set(skills))})
        if failure is not None:
            raise failure
        runs.finish_mining_run(store, run_id, "done")
        total_skills = count_skills(store)
    except BaseException as e:
        status = "interrupted" if isinstance(e, KeyboardInterrupt) else "failed"
        reason = f"{type(e).__name__}: {e}"[:1000]  # a provider failure (LLMError) among them
        with contextlib.suppress(Exception):  # never masks the error itself
            runs.finish_mining_run(store, run_id, status, reason)
        raise
    finally:
        store.close()
        if pool is not None and pool is not executor:
            pool.close()  # ours: the pool's threads, or the Ray instance we started
    return {
        "db": str(store.path),
        "run_id": run_id,
        "beam": beam,
        "workloads": results,
        "skills": total_skills,
        "elapsed_s": time.perf_counter() - t0,
    }


def _longest_first(folders: list[Path]) -> list[int]:
    """Start order of the walks: the most operator sites in the expert first (a walk's length
    follows them), so the long walks do not start last and leave one worker alone at the end.
    Only the start order: the rows do not depend on it."""
    from klineage.deopt.registry import operators
    from klineage.source.model import CudaSource

    def sites(folder: Path) -> int:
        try:
            src = CudaSource.from_file(folder / "expert.cu")
        except Exception:  # the walk reports it; here it only sorts last
            return -1
        n = 0
        for op in operators():
            with contextlib.suppress(Exception):
                n += len(op.find(src))
        return n

    weight = [sites(f) for f in folders]
    return sorted(range(len(folders)), key=lambda i: (-weight[i], i))


def _walk_all(
    n: int,
    walk_one: Callable[[int], WalkSummary],
    walkers: int,
    stop: threading.Event,
    order: list[int] | None = None,
) -> list[WalkSummary | BaseException]:
    """Run `walk_one(0) .. walk_one(n-1)`, at most `walkers` at once, started in `order` (default:
    corpus order);
    each outcome is a summary or the exception that walk raised. On KeyboardInterrupt (here, or
    raised in a walk) every walk is told to stop, the waiting ones never start, and this returns
    only once the running ones have ended (at their next gate verdict), then re-raises."""
    outcomes: list[WalkSummary | BaseException | None] = [None] * n
    interrupted: BaseException | None = None
    ex = ThreadPoolExecutor(max_workers=max(1, min(walkers, n)), thread_name_prefix="klineage-walk")
    futures: dict[Future[WalkSummary], int] = {}
    try:
        futures = {ex.submit(walk_one, i): i for i in (order if order is not None else range(n))}
        pending = set(futures)
        while pending:
            done, pending = wait(pending, timeout=0.5, return_when=FIRST_COMPLETED)
            for fut in done:
                err = fut.exception()
                outcomes[futures[fut]] = err if err is not None else fut.result()
                if isinstance(err, KeyboardInterrupt):
                    raise err
    except BaseException as e:  # Ctrl-C while waiting, or a walk's KeyboardInterrupt
        interrupted = e
        stop.set()
        for fut in futures:
            fut.cancel()
    finally:
        ex.shutdown(wait=True, cancel_futures=True)  # running walks end at their next check
    if interrupted is not None:
        raise interrupted
    return [o if o is not None else KeyboardInterrupt() for o in outcomes]


class _NoProgress:
    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: object) -> None:
        return None


def _progress(console: Console | None) -> Any:
    if console is None or not console.is_terminal:
        return _NoProgress()
    return Progress(SpinnerColumn(), TextColumn("{task.description}"), TimeElapsedColumn(), console=console)
