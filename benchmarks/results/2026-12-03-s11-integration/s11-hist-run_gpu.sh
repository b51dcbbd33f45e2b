#!/usr/bin/env bash
# s11-hist (issue 24): privatized scattered atomics. In one process on the H200, checked and timed
# beside naive.cu and torch: the new corpus workload class_weight_share (naive one global atomic
# per label; expert: one wave, 128-bit loads, per-block shared sums, then one block normalizes),
# and the held-out instances whose emu curriculum kernel this branch changes (histogram takes
# privatized_atomics; the elementwise ones take the newly mined grid_stride skill), their
# curriculum kernels copied from the CPU emulator round into .gpu/ho/<name>/best.cu, beside the
# same round with the shipped store alone (main's skills, this branch's code: .gpu/ho_before/).
# Finishes within HIST_SECONDS (default 70) of its start.
# Out: $OUT/s11-hist/hist.tgz (log, JSON, env) and $OUT/s11-hist/hist.txt (the table).
cd "$(dirname "$0")"
export KLINEAGE_SITE=${KLINEAGE_SITE:-/tmp/site}
T0=$(date +%s)
source benchmarks/gpu_env.sh
export KLINEAGE_HOME=/tmp/klh-s11-hist
mkdir -p "$OUT/s11-hist"
RUN=/tmp/s11-hist-run; rm -rf "$RUN"; mkdir -p "$RUN"
{ nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; python3 -c 'import torch; print("torch", torch.__version__)';
  cat COMMIT 2>/dev/null; echo "setup $(( $(date +%s) - T0 )) s"; } > "$RUN/env.txt" 2>&1
WL=(--workload expert_kernels/class_weight_share)
for d in .gpu/ho/*/; do n=$(basename "$d"); [ -d "heldout/$n" ] && WL+=(--workload "heldout/$n"); done
LEFT=$(( ${HIST_SECONDS:-70} - 8 - ($(date +%s) - T0) ))  # 8 s for the table and the tar
timeout "$LEFT" python3 benchmarks/materialized_bench.py "${WL[@]}" \
  --run "expert={dir}/../{name}/expert.cu" --run "curriculum=.gpu/ho/{name}/best.cu" \
  --run "before=.gpu/ho_before/{name}/best.cu" \
  --budget-s 0.2 --deadline-s $(( LEFT - 12 )) --out "$RUN" > "$RUN/bench.log" 2>&1
echo "rc=$? wall $(( $(date +%s) - T0 )) s" >> "$RUN/bench.log"
{ cat "$RUN/env.txt"; sed -n '/^| workload/,$p' "$RUN/bench.log"; } > "$OUT/s11-hist/hist.txt"
grep -q '^| workload' "$RUN/bench.log" || tail -30 "$RUN/bench.log" >> "$OUT/s11-hist/hist.txt"
tar -czf "$OUT/s11-hist/hist.tgz" -C "$RUN" --exclude='*.so' --exclude='*.o' --exclude='build' . 2>/dev/null
tail -30 "$OUT/s11-hist/hist.txt"
