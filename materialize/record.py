"""Everything a run leaves behind: DuckDB rows (materialization_runs / _steps, kernels, gate_runs,
llm_exchanges) and the output folder (start.cu, step-NN-<skill>.cu, best.cu, trace.json).

trace.json is rewritten after every step, so a run that stops early (cost limit, provider error,
Ctrl-C) still leaves the trace of what was done.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from klineage.gates.result import GateResult
from klineage.llm.base import Exchange
from klineage.source.digest import source_hash
from klineage.store import lineage as lineage_rows
from klineage.store import runs
from klineage.store.db import Store
from klineage.store.llm import put_exchange


def device_of(r: GateResult) -> str:
    timing_device = (r.timing.extra or {}).get("device") if r.timing else None
    return (
        timing_device
        or (r.profile or {}).get("device")
        or ("cpu-emulator" if r.backend == "emu" else r.backend)
    )


def safe_name(label: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", label)[:60] or "step"


class RunRecorder:
    """Writes one run's rows and files; `store` None records files only."""

    def __init__(self, store: Store | None, out_dir: Path, run_id: str, workload: str) -> None:
        self.store = store
        self.out_dir = out_dir
        self.run_id = run_id
        self.workload = workload
        self.step_index = 0  # the step an LLM exchange belongs to
        out_dir.mkdir(parents=True, exist_ok=True)

    # ---- DuckDB ---------------------------------------------------------------------------
    def start(
        self, provider: str, model: str | None, skills_mode: str, order: str, budget: int, backend: str
    ) -> None:
        if self.store is not None:
            runs.start_materialization_run(
                self.store, self.run_id, self.workload, provider, model, skills_mode, order, budget, backend
            )

    def kernel(self, text: str, role: str, path: Path | None = None) -> str:
        h = source_hash(text)
        if self.store is not None:
            with self.store.transaction() as con:
                lineage_rows.record_kernel(
                    con, h, self.workload, role, str(path) if path else None, text, first_name_wins=False
                )
        return h

    def gate_run(self, text: str, r: GateResult) -> None:
        if self.store is None or not r.artifact_id:
            return
        with self.store.transaction() as con:
            lineage_rows.record_gate_run(
                con, source_hash(text), self.workload, r, device_of(r), first_name_wins=False
            )

    def step(self, rec: dict[str, Any]) -> None:
        if self.store is not None:
            runs.put_materialization_step(self.store, self.run_id, rec)

    def exchange(self, ex: Exchange) -> None:
        """An LLM exchange (prompt, reply, tokens, cost, latency); the key is never part of it."""
        if self.store is not None:
            put_exchange(self.store, ex, self.run_id, self.step_index)

    def finish(self, status: str, best_hash: str | None, summary: dict[str, Any]) -> None:
        if self.store is not None:
            runs.finish_materialization_run(self.store, self.run_id, status, best_hash, summary)

    # ---- files ----------------------------------------------------------------------------
    def write_source(self, name: str, text: str) -> Path:
        path = self.out_dir / name
        path.write_text(text)
        return path

    def write_trace(self, doc: dict[str, Any]) -> Path:
        path = self.out_dir / "trace.json"
        tmp = path.with_suffix(".json.tmp")
        tmp.write_text(json.dumps(doc, indent=1, default=str) + "\n")
        tmp.replace(path)
        return path
