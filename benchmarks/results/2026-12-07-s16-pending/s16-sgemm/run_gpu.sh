#!/usr/bin/env bash
# s16-sgemm (issue 25: sgemm expert >= 0.85x cuBLAS, TF32 off). One process: the sgemm expert and
# compile-time variants of expert_kernels/sgemm/variants/expert_knobs.cu (its no-define build is
# the expert: same PTX up to register names), each checked through the cuda gate's correctness
# protocol on the workload's test shapes (both 128-bit and scalar paths of the large config:
# 2100x2052x300 and 2049x2051x77), then timed at the first bench shape (4096^3) beside naive.cu
# and cuBLAS (torch addmm, TF32 off). Variants: most promising first (the deadline cuts the tail).
# Run from the repo root; honours $LIMIT_S (default 90); out: $OUT/s16-sgemm/{variants/,bench/,table.txt}.
# KL_DRY_RUN=1 (on the CPU): writes the variants and lists the kernels the bench would time.
set -u
T0=$(date +%s)
LIMIT=${LIMIT_S:-90}
B=s16-sgemm
SRC=expert_kernels/sgemm/variants/expert_knobs.cu
REGS=.devwork/$B/regs.txt   # made on the CPU: nvcc -cubin -Xptxas -v of each variant (sm_90a)
O="$OUT/$B"
export KLINEAGE_HOME=/tmp/klh-$B
mkdir -p "$O/variants" "$O/bench"
TABLE="$O/table.txt"
{ nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader; } > "$TABLE" 2>&1

# label: defines (comma-separated); the large config only (the bench shapes use it)
VARIANTS=(
  "cp3_t8x16_bk8:SGEMM_A_TRANS=0,SGEMM_STAGES=3,SGEMM_WN=64,SGEMM_BK=8"
  "bk8:SGEMM_BK=8"
  "cp3:SGEMM_A_TRANS=0,SGEMM_STAGES=3"
  "cp3_t8x16:SGEMM_A_TRANS=0,SGEMM_STAGES=3,SGEMM_WN=64"
  "b128x256_bk8:SGEMM_BN=256,SGEMM_WN=64,SGEMM_MIN_BLOCKS=1,SGEMM_BK=8"
  "t8x16_bk8:SGEMM_WN=64,SGEMM_BK=8"
  "cp4:SGEMM_A_TRANS=0,SGEMM_STAGES=4"
  "b256x128_bk8:SGEMM_BM=256,SGEMM_WM=128,SGEMM_MIN_BLOCKS=1,SGEMM_BK=8"
  "bk8_swz8:SGEMM_BK=8,SGEMM_SWIZZLE=8"
  "cp4_t8x16_bk8:SGEMM_A_TRANS=0,SGEMM_STAGES=4,SGEMM_WN=64,SGEMM_BK=8"
)
args=(--kernel expert=expert_kernels/sgemm/expert.cu)
for v in "${VARIANTS[@]}"; do
  label=${v%%:*}; defs=${v#*:}
  { for d in ${defs//,/ }; do echo "#define ${d%%=*} ${d#*=}"; done; cat "$SRC"; } > "$O/variants/$label.cu"
  args+=(--kernel "$label=$O/variants/$label.cu")
done

timeout $(( LIMIT - 8 )) python3 -m klineage timings bench --workload expert_kernels/sgemm "${args[@]}" \
  --budget-s 0.5 --deadline-s $(( LIMIT - 25 )) --out "$O/bench" ${KL_DRY_RUN:+--dry-run} > "$O/bench.log" 2>&1
echo "bench rc=$? at $(( $(date +%s) - T0 )) s" >> "$TABLE"

python3 - "$O/bench" "$REGS" "${VARIANTS[@]}" >> "$TABLE" 2>&1 <<'PY'
import json, sys
from pathlib import Path
out, regs_file, variants = Path(sys.argv[1]), Path(sys.argv[2]), sys.argv[3:]
regs = {}
if regs_file.exists():
    for line in regs_file.read_text().splitlines():
        label, _, rest = line.partition(" ")
        regs[label] = rest.strip()
defines = dict(v.split(":", 1) for v in variants)
f, partial = out / "materialized_bench.json", out / "materialized_bench.partial.json"
if not f.exists() and not partial.exists():
    sys.exit(f"no JSON under {out}: see bench.log")
row = (json.loads(f.read_text())["rows"] if f.exists() else json.loads(partial.read_text()))[0]
vendor = row.get("torch_ms")
fmt = lambda v, p=4: f"{v:.{p}f}" if isinstance(v, (int, float)) else "-"
b = row.get("bench") or {}
flop = 2.0 * b.get("M", 0) * b.get("N", 0) * b.get("K", 0)
print(f"bench {row.get('bench')}; cuBLAS (TF32 off) {fmt(vendor)} ms ({fmt(flop / vendor / 1e9 if vendor else None, 1)} TFLOP/s); naive {fmt(row.get('naive', {}).get('ms'))} ms")
print("| variant | regs / spills (vec path) | ms | TFLOP/s | x cuBLAS | x expert | check | defines |")
print("|---|---|---|---|---|---|---|---|")
expert_ms = row.get("expert", {}).get("ms")
for label in ["expert", *defines]:
    k = row.get(label, {})
    ms = k.get("ms")
    x_c = vendor / ms if ms and vendor else None
    x_e = expert_ms / ms if ms and expert_ms else None
    tf = flop / ms / 1e9 if ms else None
    print(f"| {label} | {regs.get(label, '-')} | {fmt(ms)} | {fmt(tf, 1)} | {fmt(x_c, 3)} | {fmt(x_e, 3)} | {k.get('check', '-')} | {defines.get(label, '')} |")
PY
echo "total $(( $(date +%s) - T0 )) s" >> "$TABLE"
tail -4 "$O/bench.log"
cat "$TABLE"
