#!/usr/bin/env bash
# s11-tc (issue 25): the leave-one-out CPU round's best kernels (budget 20, curriculum and none) of
# sgemm, gemm_bf16 and linear_relu_bf16 (the new WMMA expert's workload), and each expert, checked
# and timed on the H200 beside naive.cu and the vendor call (cuBLAS with TF32 off for sgemm, cuBLAS
# bf16 for the others), one process per workload. Finishes within TC_SECONDS (default 110) of its
# start. Out: $OUT/s11-tc/tc.tgz (logs, JSON) and $OUT/s11-tc/table.txt (x naive, x vendor).
cd "$(dirname "$0")"
export KLINEAGE_SITE=${KLINEAGE_SITE:-/tmp/site}
T0=$(date +%s)
source benchmarks/gpu_env.sh
export KLINEAGE_HOME=/tmp/klh-s11-tc
mkdir -p "$OUT/s11-tc"
RUN=/tmp/s11-tc-run; rm -rf "$RUN"; mkdir -p "$RUN"
TABLE="$OUT/s11-tc/table.txt"
{ nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; python3 -c 'import torch; print("torch", torch.__version__)';
  echo "setup $(( $(date +%s) - T0 )) s"; } > "$RUN/env.txt" 2>&1
cp "$RUN/env.txt" "$TABLE"
LIMIT=${TC_SECONDS:-110}
# seconds per workload (what is left is shared in this proportion): four kernels each (naive,
# expert, curriculum, none), the naive ones the slow part
for spec in linear_relu_bf16:34 gemm_bf16:30 sgemm:30; do
  w=${spec%%:*}; want=${spec##*:}
  left=$(( LIMIT - 10 - ($(date +%s) - T0) ))   # 10 s kept for the table and the tar
  share=$(( want < left ? want : left ))
  if [ "$share" -lt 10 ]; then echo "$w: not run (no time left)" >> "$TABLE"; continue; fi
  timeout "$share" python3 benchmarks/materialized_bench.py --suite corpus --only "$w" \
    --run 'expert=expert_kernels/{name}/expert.cu' --curve .gpu/loo/curve.json --ks 20 \
    --budget-s 0.2 --deadline-s $(( share - 8 )) --out "$RUN/$w" > "$RUN/$w.log" 2>&1
  echo "$w rc=$? at $(( $(date +%s) - T0 )) s" >> "$RUN/env.txt"
done
python3 table.py "$RUN" >> "$TABLE" 2>&1
for w in linear_relu_bf16 gemm_bf16 sgemm; do grep -v "^\s*$" "$RUN/$w.log" 2>/dev/null | grep -iE "not ok|error|fault|Traceback" | head -3 | sed "s/^/$w: /" >> "$TABLE"; done
echo "wall $(( $(date +%s) - T0 )) s" >> "$TABLE"
cp "$TABLE" "$RUN/table.txt"
tar -czf "$OUT/s11-tc/tc.tgz" -C "$RUN" --exclude='*.so' --exclude='*.o' --exclude='build' . 2>/dev/null
cat "$TABLE"
