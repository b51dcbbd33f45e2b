#!/usr/bin/env bash
# s16-attnwgmma (issue 25 item 3): attention_fwd's Hopper variant on the device.
# From the repo root, after `source benchmarks/gpu_env.sh`; honours LIMIT_S (plan: 120; ~90 s used).
#  1. each knob variant written as its own file (#defines first) under $OUT/s16-attnwgmma/variants/,
#     all built at once with ptxas -v (registers, spills)                                  ~15 s
#  2. a smoke run per variant in its own process, cut at 25 s (a deadlocked ring must not stall
#     the timing process): 4 shapes, both D, both masks, vs fp32 SDPA                       ~15 s
#  3. ONE `klineage timings bench` over the mma.sync expert and every variant that passed the
#     smoke: cuda protocol check at the test shapes, then timed at the bench shape beside SDPA;
#     the bench command times a workload's first bench shape only, so the causal shape is a
#     second call on a copy of the workload whose bench list starts with it            ~2 x 30 s
#  4. the table: variant, regs, smoke, ms and x SDPA for causal 0 / 1, check
# KL_DRY=1 (a CPU machine): every variant counts as passed and the bench calls only list (--dry-run).
set -u
DRY=${KL_DRY:+--dry-run}
LIMIT_S=${LIMIT_S:-120}
B=s16-attnwgmma
D=$OUT/$B
V=$D/variants
HERE=.devwork/$B
SRC=expert_kernels/attention_fwd/variants/expert_wgmma.cu
mkdir -p "$V"
T0=$SECONDS
# label:defines, most promising first (as timed on 2026-12-07, when two consumers were the default). wg: two consumers, 128-key tiles, 2 stages,
# setmaxnreg, S and softmax overlapping P V); pp: the two consumers take turns (pingpong); c3 and
# nomaxnreg run without the overlap (it spills there). vswap is a diagnosis build (right only if
# V's descriptor offsets are the other way round), timed only if its smoke passes.
SPECS="wg:KL_CONSUMERS=2 pp:KL_CONSUMERS=2,KL_PINGPONG=1 bn176:KL_CONSUMERS=2,KL_BN=176 nooverlap:KL_CONSUMERS=2,KL_OVERLAP=0 st3:KL_CONSUMERS=2,KL_STAGES=3 c3:KL_CONSUMERS=3 nomaxnreg:KL_CONSUMERS=2,KL_SETMAXNREG=0 c1:KL_CONSUMERS=1 vswap:KL_CONSUMERS=2,KL_V_SWAP_OFFSETS=1"
LABELS=""
for spec in $SPECS; do
  lb=${spec%%:*}; defs=${spec#*:}
  LABELS="$LABELS $lb"
  { for d in ${defs//,/ }; do echo "#define ${d%%=*} ${d#*=}"; done; cat "$SRC"; } > "$V/$lb.cu"
  (nvcc -O3 -std=c++17 -gencode=arch=compute_90a,code=sm_90a -Xcompiler -fPIC -shared -Xptxas -v \
     -o "$V/$lb.so" "$V/$lb.cu" > "$V/$lb.ptxas.txt" 2>&1) &
done
wait
echo "built in $((SECONDS - T0)) s"
for lb in $LABELS; do
  [ -f "$V/$lb.so" ] && (timeout 25 python3 "$HERE/smoke.py" "$V/$lb.so" "$lb" > "$V/$lb.smoke.json" 2> "$V/$lb.smoke.err") &
done
wait
echo "smoke done at $((SECONDS - T0)) s"
KERNELS=(--kernel expert=expert_kernels/attention_fwd/expert.cu)
PASSED=""
for lb in $LABELS; do
  if grep -q '"ok": true}$' "$V/$lb.smoke.json" 2>/dev/null || [ -n "${KL_DRY:-}" ]; then
    KERNELS+=(--kernel "$lb=$V/$lb.cu"); PASSED="$PASSED $lb"
  fi
done
echo "timed: expert$PASSED"
# the causal bench shape first, in a copy of the workload (workload.py and naive.cu only)
C=$D/causal/attention_fwd
mkdir -p "$C" && cp expert_kernels/attention_fwd/naive.cu "$C/"
python3 - expert_kernels/attention_fwd/workload.py "$C/workload.py" <<'PY'
import sys
text = open(sys.argv[1]).read()
a = '{"B": 8, "H": 16, "S": 2048, "D": 128, "causal": 0},'
b = '{"B": 8, "H": 16, "S": 2048, "D": 128, "causal": 1},'
assert a in text and b in text
open(sys.argv[2], "w").write(text.replace(a, "@@").replace(b, a).replace("@@", b))
PY
LEFT=$((LIMIT_S - (SECONDS - T0) - 15))
HALF=$((LEFT / 2))
# `timeout`: a kernel that passed the smoke but hangs at the bench shape costs its call, not the script
timeout $((HALF + 5)) python3 -m klineage timings bench --workload expert_kernels/attention_fwd "${KERNELS[@]}" --budget-s 0.5 \
  --deadline-s $((HALF - 10)) --out "$D/bench" $DRY > "$D/bench.txt" 2>&1
echo "non-causal bench rc=$? at $((SECONDS - T0)) s"
LEFT=$((LIMIT_S - (SECONDS - T0) - 15))
timeout $((LEFT + 5)) python3 -m klineage timings bench --workload "$C" "${KERNELS[@]}" --budget-s 0.5 \
  --deadline-s $((LEFT - 10)) --out "$D/bench_causal" $DRY > "$D/bench_causal.txt" 2>&1
echo "causal bench rc=$? at $((SECONDS - T0)) s"
tail -n 6 "$D/bench.txt" "$D/bench_causal.txt"
for lb in $LABELS; do echo "$lb: $(grep -h 'Used\|spill' "$V/$lb.ptxas.txt" | grep -o 'Used [0-9]* registers\|[0-9]* bytes spill stores' | sort | uniq -c | tr -s ' \n' ' ')"; done
python3 "$HERE/table.py" "$D" "expert$(echo $LABELS | tr ' ' ',' | sed 's/^/,/')"
echo "total $((SECONDS - T0)) s"
