"""The run tables: `mining_runs` (one `klineage mine`) and `materialization_runs` with their
`materialization_steps` (one `klineage materialize`, one row per proposed candidate)."""

from __future__ import annotations

import json
from typing import Any

from klineage.store.db import Store

Row = dict[str, Any]


# ---- mining runs ----------------------------------------------------------------------------
def start_mining_run(store: Store, run_id: str, args: dict[str, Any]) -> None:
    with store.transaction() as con:
        con.execute(
            "INSERT INTO mining_runs (run_id, args, status) VALUES (?, ?, 'running')",
            [run_id, json.dumps(args)],
        )


def finish_mining_run(store: Store, run_id: str, status: str, reason: str | None = None) -> None:
    """status: done | failed | interrupted; `reason`: why it failed (a provider failure, say)."""
    with store.transaction() as con:
        con.execute(
            "UPDATE mining_runs SET status = ?, reason = ?, finished_at = current_timestamp WHERE run_id = ?",
            [status, reason, run_id],
        )


def interrupt_stale_mining_runs(store: Store) -> int:
    """Mark every mining run still `running` as `interrupted`; returns how many. Called when a
    run starts: DuckDB lets one process write a file at a time, so a `running` row left behind
    belongs to a run that was killed (kill -9, power loss) before it could say so."""
    with store.transaction() as con:
        n = con.execute("SELECT count(*) FROM mining_runs WHERE status = 'running'").fetchone()
        con.execute("UPDATE mining_runs SET status = 'interrupted' WHERE status = 'running'")
    return int(n[0]) if n else 0


def mining_runs(store: Store) -> list[Row]:
    return store.rows(
        "SELECT run_id, started_at, finished_at, status, args FROM mining_runs ORDER BY started_at"
    )


# ---- materialization runs -------------------------------------------------------------------
def start_materialization_run(
    store: Store,
    run_id: str,
    workload: str,
    provider: str,
    model: str | None,
    skills_mode: str,
    order: str,
    budget: int,
    backend: str,
) -> None:
    with store.transaction() as con:
        con.execute(
            "INSERT INTO materialization_runs (run_id, workload, provider, model, skills_mode, order_mode, budget,"
            " status, backend) VALUES (?, ?, ?, ?, ?, ?, ?, 'running', ?)",
            [run_id, workload, provider, model, skills_mode, order, budget, backend],
        )


def put_materialization_step(store: Store, run_id: str, rec: dict[str, Any]) -> None:
    """One step (a StepRecord's dict); the whole record is kept as `detail`."""
    with store.transaction() as con:
        con.execute(
            "INSERT OR REPLACE INTO materialization_steps (run_id, step_index, skill_id, operator, kernel_hash,"
            " gate_key, accepted, kept, category, message, time_ms, cost_usd, verdict, detail)"
            " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            [
                run_id,
                rec["index"],
                rec["skill_id"],
                rec["operator"],
                rec["kernel_hash"],
                rec["gate_key"],
                rec["accepted"],
                rec["kept"],
                rec["category"],
                rec["message"],
                rec["time_ms"],
                rec["cost_usd"],
                rec["verdict"],
                json.dumps(rec, default=str),
            ],
        )


def finish_materialization_run(
    store: Store, run_id: str, status: str, best_hash: str | None, summary: dict[str, Any]
) -> None:
    with store.transaction() as con:
        con.execute(
            "UPDATE materialization_runs SET finished_at = current_timestamp, status = ?, best_kernel_hash = ?,"
            " summary = ? WHERE run_id = ?",
            [status, best_hash, json.dumps(summary, default=str), run_id],
        )


def materialization_runs(store: Store) -> list[Row]:
    return store.rows("SELECT * FROM materialization_runs ORDER BY workload, started_at, run_id")


def materialization_steps(store: Store, run_id: str) -> list[Row]:
    return store.rows("SELECT * FROM materialization_steps WHERE run_id = ? ORDER BY step_index", [run_id])
