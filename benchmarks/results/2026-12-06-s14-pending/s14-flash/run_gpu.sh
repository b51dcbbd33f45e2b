#!/usr/bin/env bash
# s14-flash (issue 25): flash_fusion's tensor-core forward on a 64-row, 4-warp tile with row-pointer
# staging, on the GPU. In one process per run, each kernel first checked on the workload's test
# shapes, then timed at its first bench shape beside naive.cu and torch SDPA:
#  (1) attention_fwd (B 8, H 16, S 2048, D 128, causal 0): flash_tc (flash_fusion alone, this
#      branch), flash_tc_s13 (the same step as main writes it: 32-row tile, element staging),
#      loo_best (this branch's leave-one-out curriculum best, CPU emu round, budget 10),
#      loo_best_s13 (s13's leave-one-out best: the kernel behind the 0.0099x SDPA figure);
#  (2) the same workload with the causal bench shape first (.devwork/s14-flash/attention_fwd_causal,
#      a copy whose only change is the order of the two bench shapes): flash_tc, flash_tc_s13, loo_best.
# Kernels: .devwork/s14-flash/kernels/ (made on the CPU by this branch's code, main's for *_s13).
# Run from the repo root; honours $LIMIT_S (default 90); out: $OUT/s14-flash/{table.txt,logs.tgz}.
set -u
T0=$(date +%s)
LIMIT=${LIMIT_S:-90}
D=.devwork/s14-flash
K=$D/kernels
export KLINEAGE_HOME=/tmp/klh-s14-flash
O="$OUT/s14-flash"; RUN=/tmp/s14-flash-run
rm -rf "$RUN"; mkdir -p "$RUN" "$O"
TABLE="$O/table.txt"
{ nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; python3 -c 'import torch; print("torch", torch.__version__)'; } > "$TABLE" 2>&1
share() {  # seconds for the next stage: what it wants, or what is left (8 s kept for the table)
  local left=$(( LIMIT - 8 - ($(date +%s) - T0) )); echo $(( $1 < left ? $1 : left ))
}
plain=(--kernel flash_tc=$K/attention_fwd-flash_tc.cu --kernel flash_tc_s13=$K/attention_fwd-flash_tc_s13.cu
       --kernel loo_best=$K/attention_fwd-loo_best.cu --kernel loo_best_s13=$K/attention_fwd-loo_best_s13.cu)
causal=(--kernel flash_tc=$K/attention_fwd-flash_tc.cu --kernel flash_tc_s13=$K/attention_fwd-flash_tc_s13.cu
        --kernel loo_best=$K/attention_fwd-loo_best.cu)
for run in noncausal causal; do
  s=$(share 48)
  if [ "$s" -lt 15 ]; then echo "$run: not run (no time left)" >> "$TABLE"; continue; fi
  if [ $run = noncausal ]; then w=expert_kernels/attention_fwd; args=("${plain[@]}"); else w=$D/attention_fwd_causal; args=("${causal[@]}"); fi
  timeout "$s" python3 benchmarks/materialized_bench.py --workload $w "${args[@]}" \
    --budget-s 0.15 --deadline-s $(( s - 8 )) --out "$RUN/$run" > "$RUN/$run.log" 2>&1
  echo "$run rc=$? at $(( $(date +%s) - T0 )) s" >> "$TABLE"
done
python3 - "$RUN" >> "$TABLE" 2>&1 <<'PY'
import json, sys
from pathlib import Path
run = Path(sys.argv[1])
fmt = lambda v: f"{v:.4f}" if isinstance(v, (int, float)) else "-"
print("run | kernel | check | ms | naive ms | SDPA ms | x naive | x SDPA")
for r in ("noncausal", "causal"):
    f = run / r / "materialized_bench.json"
    if not f.exists():
        print(f"{r} | no final JSON: see {r}.log"); continue
    rows = json.loads(f.read_text())["rows"]  # one workload a run (named by its folder)
    row = next((x for x in rows if x["name"].startswith("attention_fwd")), None)
    if row is None:
        print(f"{r} | no row"); continue
    naive, vendor = row.get("naive", {}).get("ms"), row.get("torch_ms")
    print(f"{r} | bench {row.get('bench')} | naive check {row.get('naive', {}).get('check')}")
    for k, v in row.items():
        if isinstance(v, dict) and "ms" in v and k != "naive":
            ms = v.get("ms")
            print(f"{r} | {k} | {v.get('check')} | {fmt(ms)} | {fmt(naive)} | {fmt(vendor)} | "
                  f"{fmt(naive / ms if ms and naive else None)} | {fmt(vendor / ms if ms and vendor else None)}")
PY
for r in noncausal causal; do grep -iE "not ok|error|fault|Traceback|mismatch" "$RUN/$r.log" 2>/dev/null | head -3 | sed "s/^/$r: /" >> "$TABLE"; done
echo "wall $(( $(date +%s) - T0 )) s" >> "$TABLE"
tar -czf "$O/logs.tgz" -C "$RUN" --exclude='*.so' --exclude='*.o' --exclude='build' . 2>/dev/null
cat "$TABLE"
