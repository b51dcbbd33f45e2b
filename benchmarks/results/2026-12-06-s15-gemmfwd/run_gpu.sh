#!/usr/bin/env bash
# s15-gemmfwd (issue 25): the tensor_core forward on the GPU. In one process per workload, each
# kernel first checked on the workload's test shapes (cuda gate protocol), then timed at its first
# bench shape beside naive.cu and cuBLAS (torch.matmul / F.linear, bf16):
#  (1) gemm_bf16 (4096^3): loo_best (this branch's leave-one-out curriculum best, CPU emu round,
#      budget 10: tensor_core as mma.sync + ldmatrix on 64x64 warp tiles, 64-wide K slices, three
#      cp.async stages, whole-slice staging without per-element tests; restrict, ldg),
#      loo_wmma3 (the same round at this branch's first commit: WMMA on 64x64 warp tiles with the
#      new staging and ring), loo_main (main's leave-one-out best: the kernel behind 0.185x cuBLAS),
#      expert (expert_kernels/gemm_bf16/expert.cu); then two geometry variants of tensor_core's forward
#      alone (not the branch's default, made by setting wmma_gemm's constants): tc_bk32s4 (32-wide K
#      slices, four stages, 75,776 B smem, 165 registers) and tc_n256bk32s4 (128 x 256 block tile,
#      8 warps, the same ring, 108,544 B), to choose the geometry next (the default: 218 registers,
#      107,520 B);
#  (2) linear_relu_bf16 (4096^3, W stored N x K): tc (tensor_core's forward alone on naive.cu,
#      this branch; B read through ldmatrix without .trans), expert.
# Kernels: .devwork/s15-gemmfwd/kernels/ (made on the CPU by this branch's code); loo_main is main's round
# today, byte-identical to benchmarks/results/2026-12-03-s11-tc/gemm_bf16_curriculum_best.cu (timed from there).
# Run from the repo root; honours $LIMIT_S (default 90); out: $OUT/s15-gemmfwd/{table.txt,logs.tgz}.
set -u
T0=$(date +%s)
LIMIT=${LIMIT_S:-90}
D=.devwork/s15-gemmfwd
K=$D/kernels
export KLINEAGE_HOME=/tmp/klh-s15-gemmfwd
O="$OUT/s15-gemmfwd"; RUN=/tmp/s15-gemmfwd-run
rm -rf "$RUN"; mkdir -p "$RUN" "$O"
TABLE="$O/table.txt"
{ nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; python3 -c 'import torch; print("torch", torch.__version__)'; } > "$TABLE" 2>&1
share() {  # seconds for the next stage: what it wants, or what is left (8 s kept for the table)
  local left=$(( LIMIT - 8 - ($(date +%s) - T0) )); echo $(( $1 < left ? $1 : left ))
}
gemm=(--kernel loo_best=$K/gemm_bf16-loo_best.cu --kernel loo_main=benchmarks/results/2026-12-03-s11-tc/gemm_bf16_curriculum_best.cu
      --kernel expert=expert_kernels/gemm_bf16/expert.cu --kernel loo_wmma3=$K/gemm_bf16-loo_best_wmma3.cu
      --kernel tc_bk32s4=$K/gemm_bf16-tc_bk32s4.cu --kernel tc_n256bk32s4=$K/gemm_bf16-tc_n256bk32s4.cu)
linear=(--kernel tc=$K/linear_relu_bf16-tc.cu --kernel expert=expert_kernels/linear_relu_bf16/expert.cu)
for run in gemm_bf16 linear_relu_bf16; do
  if [ $run = gemm_bf16 ]; then s=$(share 58); args=("${gemm[@]}"); else s=$(share 30); args=("${linear[@]}"); fi
  if [ "$s" -lt 15 ]; then echo "$run: not run (no time left)" >> "$TABLE"; continue; fi
  timeout "$s" python3 benchmarks/materialized_bench.py --workload expert_kernels/$run "${args[@]}" \
    --budget-s 0.15 --deadline-s $(( s - 8 )) --out "$RUN/$run" > "$RUN/$run.log" 2>&1
  echo "$run rc=$? at $(( $(date +%s) - T0 )) s" >> "$TABLE"
done
python3 - "$RUN" >> "$TABLE" 2>&1 <<'PY'
import json, sys
from pathlib import Path
run = Path(sys.argv[1])
fmt = lambda v: f"{v:.4f}" if isinstance(v, (int, float)) else "-"
print("workload | kernel | check | ms | naive ms | cuBLAS ms | x naive | x cuBLAS")
for r in ("gemm_bf16", "linear_relu_bf16"):
    f = run / r / "materialized_bench.json"
    if not f.exists():
        print(f"{r} | no final JSON: see {r}.log"); continue
    rows = json.loads(f.read_text())["rows"]
    row = next((x for x in rows if x["name"].startswith(r)), None)
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
for r in gemm_bf16 linear_relu_bf16; do grep -iE "not ok|error|fault|Traceback|mismatch" "$RUN/$r.log" 2>/dev/null | head -3 | sed "s/^/$r: /" >> "$TABLE"; done
echo "wall $(( $(date +%s) - T0 )) s" >> "$TABLE"
tar -czf "$O/logs.tgz" -C "$RUN" --exclude='*.so' --exclude='*.o' --exclude='build' . 2>/dev/null
cat "$TABLE"
