"""Where a GPU loop's gate time went (issue 26): per stage, from the gate runs a materializer
bench or `klineage heldout` recorded in its runs.duckdb (`GateResult.stages_s`, and the profile
stage's own phases in `timing.extra.phases_s`), and, given resident-worker logs, the worker's own
time around each candidate (first look at a workload, the health check) and the free device
memory other processes took while it was idle.

    python3 benchmarks/gate_stages.py OUT/loo/materialize/runs.duckdb [HOME/resident-worker.log ...]

The GPU is the loop's bottleneck when `device_wait_s` dominates `elapsed_s`: then the sum of
`run_s` over the call is what one GPU can serve, and these rows say what to cut.
"""

from __future__ import annotations

import json
import statistics as st
import sys
from pathlib import Path

import duckdb

from klineage.gates.resident import TIMES_LINE

STAGES = ("nvcc_s", "build_s", "compile_s", "device_wait_s", "run_s", "worker_load_s")
STAGES_AFTER = ("worker_correctness_s", "worker_profile_s")


def gate_rows(db: Path) -> list[tuple[dict, object]]:
    con = duckdb.connect(str(db), read_only=True)
    try:
        rows = con.sql("select result, created_at from gate_runs order by created_at").fetchall()
    finally:
        con.close()
    return [(json.loads(r), when) for r, when in rows]


def stage_samples(rows: list[tuple[dict, object]]) -> dict[str, list[float]]:
    per: dict[str, list[float]] = {}

    def add(key: str, value: float) -> None:
        per.setdefault(key, []).append(float(value))

    for d, _when in rows:
        s = d.get("stages_s") or {}
        for k in (*STAGES, *STAGES_AFTER):
            if k in s:
                add(k, s[k])
        phases = ((d.get("timing") or {}).get("extra") or {}).get("phases_s") or {}
        for k, v in phases.items():
            add(f"profile.{k}", v)
        add("elapsed_s", d.get("elapsed_s", 0.0))
        waited = s.get("compile_s", 0) + s.get("device_wait_s", 0) + s.get("run_s", 0)
        add("queue_s", d.get("elapsed_s", 0.0) - waited)
    return per


def worker_samples(logs: list[Path]) -> dict[str, list[float]]:
    per: dict[str, list[float]] = {}
    for log in logs:
        if not log.is_file():
            continue
        for m in TIMES_LINE.finditer(log.read_text(errors="replace")):
            for k, v in m.groupdict().items():
                per.setdefault(f"worker.{k}", []).append(float(v))
    return per


def table(per: dict[str, list[float]]) -> list[str]:
    out = ["| stage | n | median s | p90 s | sum s |", "|---|---:|---:|---:|---:|"]
    for k, v in per.items():
        if v:
            p90 = sorted(v)[int(0.9 * (len(v) - 1))]
            out.append(f"| {k} | {len(v)} | {st.median(v):.2f} | {p90:.2f} | {sum(v):.0f} |")
    return out


def main(argv: list[str]) -> int:
    if not argv:
        print("usage: gate_stages.py RUNS.duckdb [WORKER.log ...]", file=sys.stderr)
        return 2
    rows = gate_rows(Path(argv[0]))
    if rows:
        span = (rows[-1][1] - rows[0][1]).total_seconds()  # type: ignore[operator]
        print(f"{len(rows)} gates, span {span:.0f} s")
    else:
        print("no gates")
    print("\n".join(table(stage_samples(rows) | worker_samples([Path(p) for p in argv[1:]]))))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
