#!/usr/bin/env bash
# The session's combined device call: each helper's run_gpu.sh in turn, each under its own limit.
set -u
cd "$(dirname "$0")/.."
source benchmarks/gpu_env.sh
export OUT=${OUT:-/tmp/out}
T0=$SECONDS
for spec in ${KL_FINAL:-s10-kb:285 s10-heldout:130 s10-gemm:105 s10-refactor:45}; do
  name=${spec%%:*}; limit=${spec##*:}
  s=.devwork/$name/run_gpu.sh
  [ -f "$s" ] || { echo "$name: no script" | tee -a "$OUT/final.txt"; continue; }
  t=$SECONDS
  mkdir -p "$OUT/$name"
  KB_SECONDS=$limit HO_SECONDS=$limit GEMM_SECONDS=$limit timeout $((limit + 10)) bash "$s" > "$OUT/$name/stdout.txt" 2>&1
  echo "$name rc=$? $((SECONDS - t)) s" | tee -a "$OUT/final.txt"
  source benchmarks/gpu_env.sh > /dev/null 2>&1   # main's mapping back for the next one
done
echo "total $((SECONDS - T0)) s" | tee -a "$OUT/final.txt"
for d in "$OUT"/s10-*; do echo "== $d"; tail -25 "$d/stdout.txt"; done
# at most 8 files come back: one archive of everything, the call's summary and the tables
mkdir -p /tmp/keep && (cd "$OUT" && tar czf /tmp/keep/all.tgz .) && cp "$OUT/final.txt" /tmp/keep/
for d in "$OUT"/s10-*; do n=$(basename "$d"); for t in "$d"/*.txt; do [ -f "$t" ] && [ "$(basename "$t")" != stdout.txt ] && cp "$t" "/tmp/keep/$n-$(basename "$t")"; done; done
rm -rf "${OUT:?}"/* && cp /tmp/keep/* "$OUT"/ && cp /tmp/keep/all.tgz "$OUT"/ ; ls -la "$OUT"
