#!/usr/bin/env bash
# s16-attnknobs (issue 25): attention_fwd expert knob sweep on the GPU. Run from the repo root
# after `source benchmarks/gpu_env.sh`; honours $LIMIT_S (plan 120), writes under $OUT/s16-attnknobs/.
# Each variant = expert_kernels/attention_fwd/variants/expert_knobs.cu with #defines prepended. `timings bench`
# times only a workload's FIRST bench shape, so it runs twice side by side: the workload as is
# (causal 0) and a copy whose bench shapes are reversed (causal 1); the cuda gate's device lock
# makes them take turns on the GPU while their builds overlap. Prints a table last.
set -u
LIMIT_S=${LIMIT_S:-120}
OUT=${OUT:-/tmp/out}
D=$OUT/s16-attnknobs
mkdir -p "$D/variants"
T0=$SECONDS
# label|defines, most promising first (a deadline cut keeps what was timed)
VARIANTS=(
  "bn32_s8|KL_BN=32 KL_RESCALE_SLACK=8"
  "u_bn32_s8|KL_BN=32 KL_RESCALE_SLACK=8 KL_UNROLL_STEPS=1"
  "qreg_bn16_s8|KL_Q_IN_REGS=1 KL_BN=16 KL_RESCALE_SLACK=8"
  "slack8|KL_RESCALE_SLACK=8"
  "bn32|KL_BN=32"
  "bkv32_s8|KL_BKV=32 KL_RESCALE_SLACK=8"
  "bkv32s3_s8|KL_BKV=32 KL_STAGES=3 KL_RESCALE_SLACK=8"
  "r16w4q_mb3_s8|KL_ROWS_PER_WARP=16 KL_Q_IN_REGS=1 KL_MIN_BLOCKS=3 KL_BKV=32 KL_RESCALE_SLACK=8"
  "qreg_bn32_s8|KL_Q_IN_REGS=1 KL_BN=32 KL_RESCALE_SLACK=8"
  "bkv128_bn32_s8|KL_BKV=128 KL_BN=32 KL_RESCALE_SLACK=8"
)
SRC=expert_kernels/attention_fwd/variants/expert_knobs.cu
KARGS=(--kernel "expert=expert_kernels/attention_fwd/expert.cu")
for v in "${VARIANTS[@]}"; do
  label=${v%%|*}; defs=${v#*|}
  { for d in $defs; do echo "#define ${d%%=*} ${d#*=}"; done; cat "$SRC"; } > "$D/variants/$label.cu"
  KARGS+=(--kernel "$label=$D/variants/$label.cu")
done
# the causal copy of the workload: same folder, bench shapes in reverse order
mkdir -p "$D/wl_causal" && rm -rf "$D/wl_causal/attention_fwd" && cp -r expert_kernels/attention_fwd "$D/wl_causal/"
python3 - "$D/wl_causal/attention_fwd/workload.py" <<'PY'
import re, sys
p = sys.argv[1]; s = open(p).read()
m = re.search(r'("bench": \[\n)(\s*\{[^\n]*"causal": 0\},\n)(\s*\{[^\n]*"causal": 1\},\n)', s)
assert m, "bench shapes not found"
open(p, "w").write(s[: m.start()] + m.group(1) + m.group(3) + m.group(2) + s[m.end():])
PY
grep -A3 '"bench"' "$D/wl_causal/attention_fwd/workload.py" | head -4
# registers / spills of every variant (nvcc -Xptxas -v), in the background, niced
(for f in "$SRC" "$D"/variants/*.cu; do
   l=$(basename "$f" .cu); [ "$f" = "$SRC" ] && l=expert
   echo "$l $(nice nvcc -arch=sm_90a -cubin -Xptxas -v -o /dev/null "$f" 2>&1 | tr '\n' ' ')" &
 done; wait) > "$D/ptxas.txt" 2>&1 &
REGS_PID=$!
DL=$((LIMIT_S - 25 - (SECONDS - T0)))
DRY=${KL_DRY:+--dry-run}   # KL_DRY=1: list the kernels only (a CPU check of this script)
timeout $((DL + 15)) python3 -m klineage timings bench --workload expert_kernels/attention_fwd "${KARGS[@]}" \
  --budget-s 0.5 --deadline-s "$DL" $DRY --out "$D/bench_c0" > "$D/bench_c0.txt" 2>&1 &
P0=$!
timeout $((DL + 15)) python3 -m klineage timings bench --workload "$D/wl_causal/attention_fwd" "${KARGS[@]}" \
  --budget-s 0.5 --deadline-s "$DL" $DRY --out "$D/bench_c1" > "$D/bench_c1.txt" 2>&1 &
P1=$!
wait $P0; echo "bench causal 0 rc=$?"
wait $P1; echo "bench causal 1 rc=$?"
wait $REGS_PID
tail -5 "$D/bench_c0.txt"; tail -5 "$D/bench_c1.txt"
python3 - "$D" <<'PY'
import glob, json, os, re, sys
d = sys.argv[1]
regs = {}
for line in open(os.path.join(d, "ptxas.txt")):
    label, _, text = line.partition(" ")
    cells = {}
    for m in re.finditer(r"ILi(\d+)ELb([01]).*?(\d+) bytes spill stores.*?Used (\d+) registers", text):
        cells[(int(m[1]), int(m[2]))] = f"{m[4]}/{m[3]}"
    regs[label] = " ".join(f"D{k[0]}c{k[1]}:{v}" for k, v in sorted(cells.items()))
devices = set()
def load(name):
    for f in ("materialized_bench.json", "materialized_bench.partial.json"):
        p = os.path.join(d, name, f)
        if os.path.exists(p):
            doc = json.load(open(p))
            if isinstance(doc, dict):
                devices.add(doc.get("device"))
            rows = doc["rows"] if isinstance(doc, dict) else doc
            return rows[0] if rows else {}
    return {}
c0, c1 = load("bench_c0"), load("bench_c1")
print("device:", ", ".join(sorted(map(str, devices))) or "?", "(partial JSON: see bench_c*.txt)")
print(f"torch SDPA ms: causal0 {c0.get('torch_ms')}  causal1 {c1.get('torch_ms')}")
print(f"{'variant':16} {'ms c0':>8} {'xSDPA c0':>8} {'ms c1':>8} {'xSDPA c1':>8}  check  regs/spill-bytes (sm_90a)")
labels = [k for k in c0 if isinstance(c0.get(k), dict) and "digest" in c0[k] and k != "naive"] or \
         [k for k in c1 if isinstance(c1.get(k), dict) and "digest" in c1[k] and k != "naive"]
def cell(r, lb, key):
    v = (r.get(lb) or {}).get(key)
    return f"{v:.4f}" if isinstance(v, float) else "-"
for lb in labels:
    chk = {(c0.get(lb) or {}).get("check"), (c1.get(lb) or {}).get("check")} - {None}
    print(f"{lb:16} {cell(c0, lb, 'ms'):>8} {cell(c0, lb, 'x_torch'):>8} {cell(c1, lb, 'ms'):>8} {cell(c1, lb, 'x_torch'):>8}  "
          f"{','.join(sorted(map(str, chk)))[:30]}  {regs.get(lb, '?')}")
PY
echo "s16-attnknobs total $((SECONDS - T0)) s"
