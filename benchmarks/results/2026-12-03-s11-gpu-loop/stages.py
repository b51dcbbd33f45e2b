"""Per-stage medians of the gate runs a materializer bench recorded in its runs.duckdb (issue 26):
where each gate's time went (`GateResult.stages_s`). Evidence of the eleventh session's
diagnosis call; run on the device as `python3 .gpu/stages.py OUT/runs.duckdb`."""

import json
import statistics as st
import sys

import duckdb

rows = (
    duckdb.connect(sys.argv[1], read_only=True)
    .sql("select workload, result, created_at from gate_runs order by created_at")
    .fetchall()
)
keys = [
    "nvcc_s",
    "build_s",
    "compile_s",
    "device_wait_s",
    "run_s",
    "worker_load_s",
    "worker_correctness_s",
    "worker_profile_s",
]
per: dict[str, list[float]] = {k: [] for k in [*keys, "elapsed_s", "queue_s"]}
for _workload, res, _when in rows:
    d = json.loads(res)
    s = d.get("stages_s") or {}
    for k in keys:
        if k in s:
            per[k].append(s[k])
    per["elapsed_s"].append(d.get("elapsed_s", 0.0))
    waited = s.get("compile_s", 0) + s.get("device_wait_s", 0) + s.get("run_s", 0)
    per["queue_s"].append(d.get("elapsed_s", 0.0) - waited)
if rows:
    print(f"{len(rows)} gates, span {(rows[-1][2] - rows[0][2]).total_seconds():.0f} s")
else:
    print("no gates")
print("| stage | n | median s | p90 s | sum s |")
print("|---|---:|---:|---:|---:|")
for k, v in per.items():
    if v:
        p90 = sorted(v)[int(0.9 * (len(v) - 1))]
        print(f"| {k} | {len(v)} | {st.median(v):.2f} | {p90:.2f} | {sum(v):.0f} |")
