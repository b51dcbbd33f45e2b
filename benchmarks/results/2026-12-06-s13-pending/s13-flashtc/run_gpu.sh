#!/usr/bin/env bash
# s13-flashtc (issue 25): flash_fusion's tensor-core forward on the H200. In one process per
# workload, each kernel first checked on the workload's test shapes, then timed at its first bench
# shape beside naive.cu and torch SDPA:
#  (1) attention_fwd (B 8, H 16, S 2048, D 128, causal 0): flash_fusion alone, tensor-core form
#      (flash_tc), the same step in the previous fp32 SIMT form (flash_simt), and the leave-one-out
#      curriculum best of the CPU emu round at budget 20 (loo_best);
#  (2) attention_gqa (B 4, H 32, G 8, Sq 1024, Sk 4096, D 64): expert, flash_tc, flash_simt.
# Kernels: benchmarks/results/2026-12-06-s13-flashtc/ (made on the CPU by this branch's code).
# Run from the repo root; honours $LIMIT_S (default 90); out: $OUT/s13-flashtc/{table.txt,logs.tgz}.
set -u
T0=$(date +%s)
LIMIT=${LIMIT_S:-90}
K=benchmarks/results/2026-12-06-s13-flashtc
export KLINEAGE_HOME=/tmp/klh-s13-flashtc
O="$OUT/s13-flashtc"; RUN=/tmp/s13-flashtc-run
rm -rf "$RUN"; mkdir -p "$RUN" "$O"
TABLE="$O/table.txt"
{ nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; python3 -c 'import torch; print("torch", torch.__version__)'; } > "$TABLE" 2>&1
share() {  # seconds for the next stage: what it wants, or what is left (8 s kept for the table)
  local left=$(( LIMIT - 8 - ($(date +%s) - T0) )); echo $(( $1 < left ? $1 : left ))
}
fwd=(--kernel flash_tc=$K/attention_fwd-flash_tc.cu --kernel flash_simt=$K/attention_fwd-flash_simt.cu)
[ -f $K/attention_fwd-loo_best.cu ] && fwd+=(--kernel loo_best=$K/attention_fwd-loo_best.cu)
gqa=(--kernel expert=expert_kernels/attention_gqa/expert.cu --kernel flash_tc=$K/attention_gqa-flash_tc.cu
     --kernel flash_simt=$K/attention_gqa-flash_simt.cu)
for w in attention_fwd attention_gqa; do
  s=$(share 45)
  if [ "$s" -lt 15 ]; then echo "$w: not run (no time left)" >> "$TABLE"; continue; fi
  if [ $w = attention_fwd ]; then args=("${fwd[@]}"); else args=("${gqa[@]}"); fi
  timeout "$s" python3 benchmarks/materialized_bench.py --workload expert_kernels/$w "${args[@]}" \
    --budget-s 0.15 --deadline-s $(( s - 8 )) --out "$RUN/$w" > "$RUN/$w.log" 2>&1
  echo "$w rc=$? at $(( $(date +%s) - T0 )) s" >> "$TABLE"
done
python3 - "$RUN" >> "$TABLE" 2>&1 <<'PY'
import json, sys
from pathlib import Path
run = Path(sys.argv[1])
fmt = lambda v: f"{v:.4f}" if isinstance(v, (int, float)) else "-"
print("workload | kernel | check | ms | naive ms | SDPA ms | x naive | x SDPA")
for w in ("attention_fwd", "attention_gqa"):
    f = run / w / "materialized_bench.json"
    if not f.exists():
        print(f"{w} | no final JSON: see {w}.log"); continue
    row = next((r for r in json.loads(f.read_text())["rows"] if r["name"] == w), None)
    if row is None:
        print(f"{w} | no row"); continue
    naive, vendor = row.get("naive", {}).get("ms"), row.get("torch_ms")
    print(f"{w} | bench {row.get('bench')} | naive check {row.get('naive', {}).get('check')}")
    for k, v in row.items():
        if isinstance(v, dict) and "ms" in v and k != "naive":
            ms = v.get("ms")
            print(f"{w} | {k} | {v.get('check')} | {fmt(ms)} | {fmt(naive)} | {fmt(vendor)} | "
                  f"{fmt(naive / ms if ms and naive else None)} | {fmt(vendor / ms if ms and vendor else None)}")
PY
for w in attention_fwd attention_gqa; do grep -iE "not ok|error|fault|Traceback|mismatch" "$RUN/$w.log" 2>/dev/null | head -3 | sed "s/^/$w: /" >> "$TABLE"; done
echo "wall $(( $(date +%s) - T0 )) s" >> "$TABLE"
tar -czf "$O/logs.tgz" -C "$RUN" --exclude='*.so' --exclude='*.o' --exclude='build' . 2>/dev/null
cat "$TABLE"
