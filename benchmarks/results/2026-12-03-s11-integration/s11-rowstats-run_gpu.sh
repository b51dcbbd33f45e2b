#!/usr/bin/env bash
# s11-rowstats (issue 24): softmax_bf16_short and softmax_long on the H200, one process, naive and
# torch beside: `curriculum` (the held-out materializer's best from the branch's emu round) and the
# kernels the branch's steps give, hand-chained from the operators' forward `apply` (each passed the
# emu gate): softmax_bf16_short `rows` (row_stats: a thread per row), `rows_warp` (+ warp_per_row),
# `rows_warp_vec` (+ vectorize), `rows_block` (+ block_per_row, the layout its new shape precondition
# refuses at rows of 100); softmax_long `block256` / `block1024` (the curriculum's block-per-row
# kernel with its block of 64 raised: what the CPU judge could not keep, tile_size 'no_effect').
# Finishes within RS_SECONDS (default 70) of its start.
# Out: $OUT/s11-rowstats/rowstats.tgz (log, json, env) and $OUT/s11-rowstats/rowstats.txt (table).
cd "$(dirname "$0")"
export KLINEAGE_SITE=${KLINEAGE_SITE:-/tmp/site}
T0=$(date +%s)
source benchmarks/gpu_env.sh
export KLINEAGE_HOME=/tmp/klh-s11-rowstats
mkdir -p "$OUT/s11-rowstats"
RUN=/tmp/s11-rowstats-run; rm -rf "$RUN"; mkdir -p "$RUN"
{ nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; python3 -c 'import torch; print(torch.__version__)';
  cat COMMIT; echo "setup $(( $(date +%s) - T0 )) s"; } > "$RUN/env.txt" 2>&1
K=.gpu/rowstats/{name}
LEFT=$(( ${RS_SECONDS:-70} - 8 - ($(date +%s) - T0) ))  # 8 s for the tar and the table
timeout "$LEFT" python3 benchmarks/materialized_bench.py --suite heldout --only softmax_bf16_short,softmax_long \
  --run "curriculum=$K/best.cu" --run "rows=$K/rows.cu" --run "rows_warp=$K/rows_warp.cu" \
  --run "rows_warp_vec=$K/rows_warp_vec.cu" --run "rows_block=$K/rows_block.cu" \
  --run "block256=$K/block256.cu" --run "block1024=$K/block1024.cu" \
  --budget-s 0.25 --deadline-s $(( LEFT - 12 )) --out "$RUN" > "$RUN/rowstats.log" 2>&1
echo "rc=$? wall $(( $(date +%s) - T0 )) s" >> "$RUN/rowstats.log"
{ cat "$RUN/env.txt"; sed -n '/^| workload/,$p' "$RUN/rowstats.log"; } > "$OUT/s11-rowstats/rowstats.txt"
grep -q '^| workload' "$RUN/rowstats.log" || tail -30 "$RUN/rowstats.log" >> "$OUT/s11-rowstats/rowstats.txt"
tar -czf "$OUT/s11-rowstats/rowstats.tgz" -C "$RUN" . 2>/dev/null
tail -25 "$OUT/s11-rowstats/rowstats.txt"
