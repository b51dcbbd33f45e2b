"""The `kernel_timings` table: GPU times of lineage states and naive kernels measured apart from
the gate (klineage/timings.py reads the files; this module only stores and reads rows)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from klineage.store.db import Store


@dataclass(frozen=True)
class TimingRow:
    workload: str
    kernel_hash: str
    device: str
    median_ms: float
    torch_ms: float | None
    shape_json: str  # the bench bindings, as JSON text
    measured_at: str
    source: str


def put_timings(store: Store, rows: list[TimingRow]) -> None:
    """All rows in one transaction; a row for the same (workload, kernel, device) is replaced."""
    with store.transaction() as con:
        con.executemany(
            "INSERT OR REPLACE INTO kernel_timings (workload, kernel_hash, device, median_ms, torch_ms, shape, measured_at,"
            " source, imported_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, current_timestamp)",
            [
                [
                    r.workload,
                    r.kernel_hash,
                    r.device,
                    r.median_ms,
                    r.torch_ms,
                    r.shape_json,
                    r.measured_at,
                    r.source,
                ]
                for r in rows
            ],
        )


def timing_rows(store: Store, workload: str) -> list[dict[str, Any]]:
    """(kernel_hash, device, median_ms, torch_ms) of `workload`, newest import first; none for a
    store of a schema older than the table."""
    if "kernel_timings" not in {
        r["table_name"] for r in store.rows("SELECT table_name FROM duckdb_tables()")
    }:
        return []  # a read-only store of an older schema
    return store.rows(
        "SELECT kernel_hash, device, median_ms, torch_ms FROM kernel_timings WHERE workload = ?"
        " ORDER BY imported_at DESC, device",
        [workload],
    )


def imported_by_device(store: Store) -> list[dict[str, Any]]:
    """Per device: how many kernel times were imported, and when they were measured."""
    return store.rows(
        "SELECT device, count(*) AS kernels, min(measured_at) AS first, max(measured_at) AS last"
        " FROM kernel_timings GROUP BY device ORDER BY kernels DESC, device"
    )
