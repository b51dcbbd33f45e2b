#!/usr/bin/env bash
# The session's combined device call: each helper's run_gpu.sh in turn, each under its own limit.
set -u
cd "$(dirname "$0")/.."
source benchmarks/gpu_env.sh
export OUT=${OUT:-/tmp/out}
T0=$SECONDS
for spec in ${KL_FINAL:-s11-hist:75 s11-rowstats:75 s11-tc:115 s11-attn:105}; do
  name=${spec%%:*}; limit=${spec##*:}
  s=.devwork/$name/run_gpu.sh
  [ -f "$s" ] || { echo "$name: no script" | tee -a "$OUT/final.txt"; continue; }
  t=$SECONDS
  mkdir -p "$OUT/$name"
  LIMIT_S=$limit timeout $((limit + 10)) bash "$s" > "$OUT/$name/stdout.txt" 2>&1
  echo "$name rc=$? $((SECONDS - t)) s" | tee -a "$OUT/final.txt"
  source benchmarks/gpu_env.sh > /dev/null 2>&1   # main's mapping back for the next one
done
# issue 26: the enabling step on the GPU judge (main's tree): sgemm's leave-one-out curriculum on cuda
t=$SECONDS; mkdir -p "$OUT/s11-loop"
KLINEAGE_HOME=/tmp/home_loop timeout ${KL_LOOP_S:-110} python3 benchmarks/materialize_bench.py --db .gpu/skills.duckdb \
  --backend cuda --modes curriculum --workloads ${KL_LOOP_W:-sgemm} --jobs 2 --out "$OUT/s11-loop/run" > "$OUT/s11-loop/stdout.txt" 2>&1
echo "s11-loop rc=$? $((SECONDS - t)) s" | tee -a "$OUT/final.txt"
python3 .gpu/stages.py "$OUT/s11-loop/run/runs.duckdb" > "$OUT/s11-loop/stages.txt" 2>&1
python3 - "$OUT/s11-loop/run" > "$OUT/s11-loop/steps.txt" 2>&1 <<'PY'
import glob, json, sys
for f in sorted(glob.glob(sys.argv[1] + "/*/*/trace.json")):
    t = json.load(open(f))
    print(t["workload"], t["skills_mode"], "x naive", t.get("speedup"), "x torch", t.get("speedup_vs_torch"), t.get("stop_reason"))
    for s in t["steps"]:
        print("  ", s["index"], s["move"], s["verdict"], s.get("line"), (s.get("reason") or "")[:100])
PY
echo "total $((SECONDS - T0)) s" | tee -a "$OUT/final.txt"
for d in "$OUT"/s11-*; do echo "== $d"; tail -25 "$d/stdout.txt"; done
# at most 8 files come back: one archive of everything, the call's summary and the tables
mkdir -p /tmp/keep && (cd "$OUT" && tar czf /tmp/keep/all.tgz .) && cp "$OUT/final.txt" /tmp/keep/
for d in "$OUT"/s11-*; do n=$(basename "$d"); for t in "$d"/*.txt; do [ -f "$t" ] && [ "$(basename "$t")" != stdout.txt ] && cp "$t" "/tmp/keep/$n-$(basename "$t")"; done; done
rm -rf "${OUT:?}"/* && cp /tmp/keep/* "$OUT"/ && cp /tmp/keep/all.tgz "$OUT"/ ; ls -la "$OUT"
