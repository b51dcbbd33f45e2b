#!/usr/bin/env bash
# s10-gemm (issue 25): the leave-one-out CPU round's best kernels of the compute-bound corpus
# (sgemm, gemm_bf16, attention_fwd; curriculum and none; budgets 10 and 20), checked and timed on
# the H200 beside naive.cu and the vendor call (cuBLAS with TF32 off / cuBLAS bf16 / SDPA), one
# process per workload. Finishes within GEMM_SECONDS (default 120) of its start.
# Out: $OUT/s10-gemm/gemm.tgz (logs, JSON) and $OUT/s10-gemm/table.txt (x naive, x vendor).
cd "$(dirname "$0")"
export KLINEAGE_SITE=${KLINEAGE_SITE:-/tmp/site}
T0=$(date +%s)
source benchmarks/gpu_env.sh
export KLINEAGE_HOME=/tmp/klh-s10-gemm
mkdir -p "$OUT/s10-gemm"
RUN=/tmp/s10-gemm-run; rm -rf "$RUN"; mkdir -p "$RUN"
TABLE="$OUT/s10-gemm/table.txt"
{ nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; python3 -c 'import torch; print("torch", torch.__version__)';
  echo "setup $(( $(date +%s) - T0 )) s"; } > "$RUN/env.txt" 2>&1
cp "$RUN/env.txt" "$TABLE"
LIMIT=${GEMM_SECONDS:-120}
# seconds per workload (what is left is shared in this proportion): the GEMMs build three
# kernels each at 4096^3, attention's kernels are small
for spec in sgemm:45 gemm_bf16:45 attention_fwd:18; do
  w=${spec%%:*}; want=${spec##*:}
  left=$(( LIMIT - 12 - ($(date +%s) - T0) ))   # 12 s kept for the table and the tar
  share=$(( want < left ? want : left ))
  if [ "$share" -lt 10 ]; then echo "$w: not run (no time left)" >> "$TABLE"; continue; fi
  timeout "$share" python3 benchmarks/materialized_bench.py --suite corpus --curve .gpu/loo/curve.json \
    --ks 10,20 --only "$w" --budget-s 0.2 --deadline-s $(( share - 10 )) --out "$RUN/$w" > "$RUN/$w.log" 2>&1
  echo "$w rc=$? at $(( $(date +%s) - T0 )) s" >> "$RUN/env.txt"
done
python3 - "$RUN" >> "$TABLE" 2>&1 <<'PY'
import json, sys
from pathlib import Path
run = Path(sys.argv[1])
print("workload | column | ms | naive ms | vendor ms | x naive | x vendor")
for w in ("sgemm", "gemm_bf16", "attention_fwd"):
    f = run / w / "materialized_bench.json"
    if not f.exists():
        f = run / w / "materialized_bench.partial.json"
        print(f"{w} | (no final JSON{', partial only' if f.exists() else ''}: see {w}.log)")
        continue
    doc = json.loads(f.read_text())
    row = next(r for r in doc["rows"] if r["name"] == w)
    naive, vendor = row.get("naive", {}).get("ms"), row.get("torch_ms")
    for key, x in sorted(doc.get("curve", {}).get("x_naive", {}).items()):
        ms = naive / x if x and naive else None
        xv = vendor / ms if ms and vendor else None
        fmt = lambda v: f"{v:.4f}" if isinstance(v, float) else "-"
        print(f"{w} | {key.split('|', 1)[1]} | {fmt(ms)} | {fmt(naive)} | {fmt(vendor)} | {fmt(x)} | {fmt(xv)}")
PY
for w in sgemm gemm_bf16 attention_fwd; do grep -v "^\s*$" "$RUN/$w.log" 2>/dev/null | grep -iE "not ok|error|fault|Traceback" | head -3 | sed "s/^/$w: /" >> "$TABLE"; done
echo "wall $(( $(date +%s) - T0 )) s" >> "$TABLE"
cp "$RUN/env.txt" "$RUN/table.txt" 2>/dev/null; cp "$TABLE" "$RUN/table.txt"
tar -czf "$OUT/s10-gemm/gemm.tgz" -C "$RUN" --exclude='*.so' --exclude='*.o' --exclude='build' . 2>/dev/null
cat "$TABLE"
