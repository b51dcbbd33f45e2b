"""`klineage mine`: walk every expert kernel of a corpus, then extract and merge skills."""

from __future__ import annotations

import json
import time
import uuid
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.progress import Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

from klineage.errors import KLineageError
from klineage.executor import GateExecutor, make_executor
from klineage.gates.backend import GateOptions
from klineage.skills import extract, upsert
from klineage.store.db import Store
from klineage.walker import WalkConfig, Walker, find_workloads
from klineage.workload import load_workload


def mine_corpus(
    dirs: list[Path],
    db: Path | None = None,
    backend: str = "emu",
    max_steps: int = 40,
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
) -> dict[str, Any]:
    """Mine every workload under `dirs` into the store; returns the summary report.

    `executor` is `local` (a pool of `workers` on this machine), `ray` (Ray tasks; a local Ray
    instance with `workers` CPUs unless `address` names a cluster) or an executor object, which
    the caller keeps and closes. The store is written only here, on the driver."""
    t0 = time.perf_counter()
    folders = find_workloads(dirs)
    workloads = {f: load_workload(f) for f in folders}  # bad workload.py: one clear error before any work
    store = Store(db)
    run_id = uuid.uuid4().hex[:12]
    args = {"dirs": [str(d) for d in dirs], "backend": backend, "max_steps": max_steps, "workers": workers,
            "executor": executor if isinstance(executor, str) else executor.name}
    with store.transaction() as con:
        con.execute("INSERT INTO mining_runs (run_id, args, status) VALUES (?, ?, 'running')", [run_id, json.dumps(args)])
    llm_operator = None
    if llm is not None:
        from klineage.deopt.llm_operator import LLMOperator
        from klineage.llm import get_llm
        from klineage.llm.record import store_recorder

        provider = get_llm(llm, model=llm_model, max_cost_usd=llm_max_cost, recorder=store_recorder(store, run_id=run_id))
        llm_operator = LLMOperator(provider)
    config = WalkConfig(options=GateOptions(backend=backend, timeout_s=timeout_s), max_steps=max_steps,
                        workers=workers, roundtrip=roundtrip, llm=llm_operator, llm_attempts=llm_attempts)
    results = []
    pool: GateExecutor | None = None
    try:
        pool = executor if isinstance(executor, GateExecutor) else make_executor(
            executor, workers=workers, backend=backend, address=address)
        with _progress(console) as progress:
            for folder in folders:
                task = progress.add_task(folder.name, total=None) if progress else None

                def note(msg: str, task: Any = task) -> None:
                    if progress is not None:
                        progress.update(task, description=msg[:100])

                summary = Walker(store, config, note, executor=pool).walk(folder)
                skills = upsert(store, extract(store, workloads[folder])) if not summary.skipped else []
                if progress is not None:
                    done = summary.skipped or f"{summary.accepted} steps, {len(set(skills))} skills"
                    progress.update(task, description=f"{folder.name}: {done[:90]}")
                results.append({**summary.__dict__, "skills": sorted(set(skills))})
        with store.transaction() as con:
            con.execute("UPDATE mining_runs SET status = 'done', finished_at = current_timestamp WHERE run_id = ?", [run_id])
        total_skills = int(store.scalar("SELECT count(*) FROM skills"))
    except KLineageError:
        with store.transaction() as con:
            con.execute("UPDATE mining_runs SET status = 'failed', finished_at = current_timestamp WHERE run_id = ?", [run_id])
        raise
    finally:
        store.close()
        if pool is not None and pool is not executor:
            pool.close()  # ours: the pool's threads, or the Ray instance we started
    return {"db": str(store.path), "run_id": run_id, "workloads": results, "skills": total_skills,
            "elapsed_s": time.perf_counter() - t0}


class _NoProgress:
    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: object) -> None:
        return None


def _progress(console: Console | None) -> Any:
    if console is None or not console.is_terminal:
        return _NoProgress()
    return Progress(SpinnerColumn(), TextColumn("{task.description}"), TimeElapsedColumn(), console=console)
