#!/usr/bin/env bash
# eleventh session, last call: the integrated tree (.devwork/s11-int) on the H200, one process per
# table: the held-out 23 (curriculum kernels of an emu round on the re-mined store) beside naive
# and torch, then the leave-one-out best kernels (budgets 10, 20) beside naive and torch/vendor.
set -u
cd "$(dirname "$0")/../.devwork/s11-int"
export OUT=${OUT:-/tmp/out}
export KLINEAGE_SITE=/tmp/site
source benchmarks/gpu_env.sh
export KLINEAGE_HOME=/tmp/klh-final2
mkdir -p "$OUT/ho" "$OUT/loo"
{ nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; python3 -c 'import torch; print(torch.__version__)'; cat COMMIT; } | tee "$OUT/env.txt"
t=$SECONDS
timeout ${HO_S:-110} python3 benchmarks/materialized_bench.py --suite heldout --run "curriculum=.gpu/ho/{name}/best.cu" \
  --budget-s 0.25 --deadline-s $(( ${HO_S:-110} - 15 )) --out "$OUT/ho" > "$OUT/ho/heldout.log" 2>&1
echo "heldout rc=$? $((SECONDS - t)) s"
sed -n '/^| workload/,$p' "$OUT/ho/heldout.log" > "$OUT/heldout.txt"; grep -q '^| workload' "$OUT/ho/heldout.log" || tail -30 "$OUT/ho/heldout.log" > "$OUT/heldout.txt"
t=$SECONDS
timeout ${LOO_S:-170} python3 benchmarks/materialized_bench.py --suite corpus --curve .gpu/loo/curve.json --ks 10,20 \
  --budget-s 0.2 --deadline-s $(( ${LOO_S:-170} - 15 )) --out "$OUT/loo" > "$OUT/loo/loo.log" 2>&1
echo "loo rc=$? $((SECONDS - t)) s"
grep -E '^[a-z_0-9]+: naive|kernels not timed|not ok|^\|' "$OUT/loo/loo.log" > "$OUT/loo.txt"; tail -5 "$OUT/loo/loo.log" >> "$OUT/loo.txt"
(cd "$OUT" && tar czf /tmp/final2.tgz ho loo env.txt) && rm -rf "$OUT/ho" "$OUT/loo" && cp /tmp/final2.tgz "$OUT/"
tail -40 "$OUT/heldout.txt"; tail -60 "$OUT/loo.txt"
