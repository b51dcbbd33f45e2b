"""Per-stage medians of the gate runs recorded in a materializer bench's runs.duckdb (issue 26)."""
import json, statistics as st, sys
import duckdb
rows = duckdb.connect(sys.argv[1], read_only=True).sql(
    "select workload, result, created_at from gate_runs order by created_at").fetchall()
keys = ["nvcc_s", "build_s", "compile_s", "device_wait_s", "run_s", "worker_load_s", "worker_correctness_s", "worker_profile_s"]
per = {k: [] for k in keys + ["elapsed_s", "queue_s"]}
for w, res, _ in rows:
    d = json.loads(res); s = d.get("stages_s") or {}
    for k in keys:
        if k in s: per[k].append(s[k])
    per["elapsed_s"].append(d.get("elapsed_s", 0.0))
    per["queue_s"].append(d.get("elapsed_s", 0.0) - s.get("compile_s", 0) - s.get("device_wait_s", 0) - s.get("run_s", 0))
print(f"{len(rows)} gates, span {(rows[-1][2]-rows[0][2]).total_seconds():.0f} s" if rows else "no gates")
print("| stage | n | median s | p90 s | sum s |"); print("|---|---:|---:|---:|---:|")
for k, v in per.items():
    if v:
        v2 = sorted(v); print(f"| {k} | {len(v)} | {st.median(v):.2f} | {v2[int(0.9*(len(v)-1))]:.2f} | {sum(v):.0f} |")
