#!/usr/bin/env bash
# s15-flashmma (issue 25): flash_fusion's tensor-core forward on mma.sync (Q fragments, scores,
# weights and the output tile in registers; K/V by cp.async one stage ahead; ldmatrix(.trans);
# dead key tiles above a causal diagonal neither staged nor multiplied), on the GPU. In one process
# per run, each kernel first checked on the workload's test shapes, then timed at its first bench
# shape beside naive.cu and torch SDPA:
#  (1) attention_fwd (B 8, H 16, S 2048, D 128, causal 0): flash_mma (flash_fusion alone, this
#      branch), loo_best (this branch's leave-one-out curriculum best, CPU emu round, budget 10),
#      flash_tc_s14 (main's flash_fusion form: WMMA, P through shared memory; 7.898 ms on the H200);
#  (2) the same workload with the causal bench shape first (s14-flash's copy in
#      benchmarks/results/2026-12-06-s14-pending/s14-flash/attention_fwd_causal, whose only change is
#      the order of the two bench shapes): the same three kernels.
# Kernels: benchmarks/results/2026-12-06-s15-flashmma/kernels/ (made on the CPU by this branch's code);
# flash_tc_s14 from s14-flash's folder.
# Meanwhile nvcc -Xptxas -v gives the registers/spills of flash_mma and loo_best (sm_90a).
# Run from the repo root; honours $LIMIT_S (default 90); out: $OUT/s15-flashmma/{table.txt,logs.tgz}.
set -u
T0=$(date +%s)
LIMIT=${LIMIT_S:-90}
K=benchmarks/results/2026-12-06-s15-flashmma/kernels
S14=benchmarks/results/2026-12-06-s14-pending/s14-flash
export KLINEAGE_HOME=/tmp/klh-s15-flashmma
O="$OUT/s15-flashmma"; RUN=/tmp/s15-flashmma-run
rm -rf "$RUN"; mkdir -p "$RUN" "$O"
TABLE="$O/table.txt"
{ nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; python3 -c 'import torch; print("torch", torch.__version__)'; } > "$TABLE" 2>&1
share() {  # seconds for the next stage: what it wants, or what is left (8 s kept for the table)
  local left=$(( LIMIT - 8 - ($(date +%s) - T0) )); echo $(( $1 < left ? $1 : left ))
}
for k in flash_mma loo_best; do  # registers and spills, in the background (16 cores) while the runs go
  if command -v nvcc > /dev/null; then
    ( timeout $(( LIMIT - 10 )) nvcc -arch=sm_90a -cubin -O3 -Xptxas -v -o "$RUN/$k.cubin" "$K/attention_fwd-$k.cu" > "$RUN/ptxas-$k.txt" 2>&1 ) &
  fi
done
kernels=(--kernel flash_mma=$K/attention_fwd-flash_mma.cu --kernel loo_best=$K/attention_fwd-loo_best.cu
         --kernel flash_tc_s14=$S14/kernels/attention_fwd-flash_tc.cu)
for run in noncausal causal; do
  if [ $run = noncausal ]; then s=$(share 44); else s=$(share 60); fi
  if [ "$s" -lt 15 ]; then echo "$run: not run (no time left)" >> "$TABLE"; continue; fi
  if [ $run = noncausal ]; then w=expert_kernels/attention_fwd; else w=$S14/attention_fwd_causal; fi
  timeout "$s" python3 benchmarks/materialized_bench.py --workload $w "${kernels[@]}" \
    --budget-s 0.15 --deadline-s $(( s - 6 )) --out "$RUN/$run" > "$RUN/$run.log" 2>&1
  echo "$run rc=$? at $(( $(date +%s) - T0 )) s" >> "$TABLE"
done
python3 - "$RUN" >> "$TABLE" 2>&1 <<'PY'
import json, sys
from pathlib import Path
run = Path(sys.argv[1])
fmt = lambda v: f"{v:.4f}" if isinstance(v, (int, float)) else "-"
print("run | kernel | check | ms | naive ms | SDPA ms | x naive | x SDPA | TFLOP/s")
for r in ("noncausal", "causal"):
    f = run / r / "materialized_bench.json"
    if not f.exists():
        print(f"{r} | no final JSON: see {r}.log"); continue
    rows = json.loads(f.read_text())["rows"]  # one workload a run (named by its folder)
    row = next((x for x in rows if x["name"].startswith("attention_fwd")), None)
    if row is None:
        print(f"{r} | no row"); continue
    naive, vendor = row.get("naive", {}).get("ms"), row.get("torch_ms")
    flop = 4.0 * 8 * 16 * 2048 * 2048 * 128 / (2 if r == "causal" else 1)
    print(f"{r} | bench {row.get('bench')} | naive check {row.get('naive', {}).get('check')}")
    for k, v in row.items():
        if isinstance(v, dict) and "ms" in v and k != "naive":
            ms = v.get("ms")
            print(f"{r} | {k} | {v.get('check')} | {fmt(ms)} | {fmt(naive)} | {fmt(vendor)} | "
                  f"{fmt(naive / ms if ms and naive else None)} | {fmt(vendor / ms if ms and vendor else None)} | "
                  f"{fmt(flop / ms / 1e9 if ms else None)}")
PY
wait
for k in flash_mma loo_best; do
  if [ -s "$RUN/ptxas-$k.txt" ]; then grep -E "registers|spill" "$RUN/ptxas-$k.txt" | sed "s/^/$k: /" >> "$TABLE"; else echo "$k: no ptxas output" >> "$TABLE"; fi
done
for r in noncausal causal; do grep -iE "not ok|error|fault|Traceback|mismatch" "$RUN/$r.log" 2>/dev/null | head -3 | sed "s/^/$r: /" >> "$TABLE"; done
echo "wall $(( $(date +%s) - T0 )) s" >> "$TABLE"
tar -czf "$O/logs.tgz" -C "$RUN" --exclude='*.so' --exclude='*.o' --exclude='*.cubin' --exclude='build' . 2>/dev/null
cat "$TABLE"
