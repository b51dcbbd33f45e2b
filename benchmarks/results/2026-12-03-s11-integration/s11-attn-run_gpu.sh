#!/usr/bin/env bash
# s11-attn (issue 25): attention on the H200, checked and timed in one process per workload beside
# naive.cu and SDPA, each kernel first checked on the workload's test shapes: (1) attention_fwd's
# leave-one-out CPU round, curriculum at budget 1 (flash_fusion alone) and 20, at its first bench
# shape (B 8, H 16, S 2048, D 128, causal 0); (2) the new attention_gqa expert (fp32 SIMT flash,
# plain C++) and flash_fusion applied to its naive, at (B 4, H 32, G 8, Sq 1024, Sk 4096, D 64).
# Finishes within ATTN_SECONDS (default 100).
# Out: $OUT/s11-attn/attn.tgz (logs, JSON) and $OUT/s11-attn/table.txt (x naive, x vendor).
cd "$(dirname "$0")"
export KLINEAGE_SITE=${KLINEAGE_SITE:-/tmp/site}
T0=$(date +%s)
source benchmarks/gpu_env.sh
export KLINEAGE_HOME=/tmp/klh-s11-attn
mkdir -p "$OUT/s11-attn"
RUN=/tmp/s11-attn-run; rm -rf "$RUN"; mkdir -p "$RUN"
TABLE="$OUT/s11-attn/table.txt"
{ nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; python3 -c 'import torch; print("torch", torch.__version__)';
  echo "setup $(( $(date +%s) - T0 )) s"; } > "$RUN/env.txt" 2>&1
cp "$RUN/env.txt" "$TABLE"
LIMIT=${ATTN_SECONDS:-100}
share() {  # seconds for the next stage: what it wants, or what is left (10 s kept for the table and tar)
  local left=$(( LIMIT - 10 - ($(date +%s) - T0) )); echo $(( $1 < left ? $1 : left ))
}
s=$(share 48)
if [ "$s" -ge 15 ]; then
  timeout "$s" python3 benchmarks/materialized_bench.py --suite corpus --curve .gpu/loo/curve.json --ks 1,20 --labels curriculum \
    --only attention_fwd --budget-s 0.15 --deadline-s $(( s - 8 )) --out "$RUN/attention_fwd" > "$RUN/attention_fwd.log" 2>&1
  echo "attention_fwd rc=$? at $(( $(date +%s) - T0 )) s" >> "$RUN/env.txt"
else echo "attention_fwd: not run (no time left)" >> "$TABLE"; fi
s=$(share 40)
if [ "$s" -ge 15 ]; then
  timeout "$s" python3 benchmarks/materialized_bench.py --workload expert_kernels/attention_gqa \
    --kernel expert=expert_kernels/attention_gqa/expert.cu --kernel flash_fusion=.gpu/gqa_flash_fusion.cu \
    --budget-s 0.15 --deadline-s $(( s - 8 )) --out "$RUN/attention_gqa" > "$RUN/attention_gqa.log" 2>&1
  echo "attention_gqa rc=$? at $(( $(date +%s) - T0 )) s" >> "$RUN/env.txt"
else echo "attention_gqa: not run (no time left)" >> "$TABLE"; fi
python3 - "$RUN" >> "$TABLE" 2>&1 <<'PY'
import json, sys
from pathlib import Path
run = Path(sys.argv[1])
fmt = lambda v: f"{v:.4f}" if isinstance(v, (int, float)) else "-"
print("workload | kernel | ms | naive ms | vendor ms | x naive | x vendor  (medians; see the logs for per-shape rows)")
for w in ("attention_fwd", "attention_gqa"):
    f = run / w / "materialized_bench.json"
    if not f.exists():
        f = run / w / "materialized_bench.partial.json"
        print(f"{w} | (no final JSON{', partial only' if f.exists() else ''}: see {w}.log)")
        continue
    doc = json.loads(f.read_text())
    row = next((r for r in doc["rows"] if r["name"] == w), None)
    if row is None:
        print(f"{w} | no row"); continue
    naive, vendor = row.get("naive", {}).get("ms"), row.get("torch_ms")
    print(f"{w} | bench shape {row.get('bench')} | naive check {row.get('naive', {}).get('check')}")
    cols = {k.split("|", 1)[-1]: x for k, x in (doc.get("curve", {}).get("x_naive", {}) or {}).items()}
    for k, v in row.items():
        if isinstance(v, dict) and "ms" in v and k != "naive":
            cols.setdefault(k, naive / v["ms"] if naive and v.get("ms") else None)
    for key, x in sorted(cols.items()):
        ms = naive / x if x and naive else None
        print(f"{w} | {key} | {fmt(ms)} | {fmt(naive)} | {fmt(vendor)} | {fmt(x)} | {fmt(vendor / ms if ms and vendor else None)}")
PY
for w in attention_fwd attention_gqa; do grep -v "^\s*$" "$RUN/$w.log" 2>/dev/null | grep -iE "not ok|error|fault|Traceback|mismatch" | head -3 | sed "s/^/$w: /" >> "$TABLE"; done
echo "wall $(( $(date +%s) - T0 )) s" >> "$TABLE"
cp "$TABLE" "$RUN/table.txt"
tar -czf "$OUT/s11-attn/attn.tgz" -C "$RUN" --exclude='*.so' --exclude='*.o' --exclude='build' . 2>/dev/null
cat "$TABLE"
