#!/usr/bin/env bash
# s10-heldout (issue 24): the held-out 23 on the H200, one process, naive and torch beside two
# materializer runs made on the CPU emulator: `before` (branch point 82dcc5e: no grid shrink for
# packs, warp per element of softmax_bf16_short, tile on 5 x 7 transposes) and `curriculum`
# (branch s10-heldout). Finishes within HO_SECONDS (default 150) of its start.
# Out: $OUT/s10-heldout/heldout.tgz (log, json, env) and $OUT/s10-heldout/heldout.txt (the table).
cd "$(dirname "$0")"
export KLINEAGE_SITE=${KLINEAGE_SITE:-/tmp/site}
T0=$(date +%s)
source benchmarks/gpu_env.sh
export KLINEAGE_HOME=/tmp/klh-s10-heldout
mkdir -p "$OUT/s10-heldout"
RUN=/tmp/s10-heldout-run; rm -rf "$RUN"; mkdir -p "$RUN"
{ nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; python3 -c 'import torch; print(torch.__version__)';
  cat COMMIT; echo "setup $(( $(date +%s) - T0 )) s"; } > "$RUN/env.txt" 2>&1
LEFT=$(( ${HO_SECONDS:-150} - 12 - ($(date +%s) - T0) ))  # 12 s for the tar and the table
timeout "$LEFT" python3 benchmarks/materialized_bench.py --suite heldout \
  --run "curriculum=.gpu/ho/{name}/best.cu" --run "before=.gpu/ho_before/{name}/best.cu" \
  --budget-s 0.25 --deadline-s $(( LEFT - 25 )) --out "$RUN" > "$RUN/heldout.log" 2>&1
echo "rc=$? wall $(( $(date +%s) - T0 )) s" >> "$RUN/heldout.log"
{ cat "$RUN/env.txt"; sed -n '/^| workload/,$p' "$RUN/heldout.log"; } > "$OUT/s10-heldout/heldout.txt"
grep -q '^| workload' "$RUN/heldout.log" || tail -30 "$RUN/heldout.log" >> "$OUT/s10-heldout/heldout.txt"
tar -czf "$OUT/s10-heldout/heldout.tgz" -C "$RUN" . 2>/dev/null
tail -45 "$OUT/s10-heldout/heldout.txt"
