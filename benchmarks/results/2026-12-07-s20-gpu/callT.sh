#!/usr/bin/env bash
# staged in the twentieth session, not run (no device time left). Stage with
# benchmarks/results/2026-12-07-s20-gpu/stage.sh (after `make run`); carry [".whl", ".gpu"];
# `KL_T_S=580 bash .gpu/callT.sh`, timeout_s 600. About 300 s on an H100; on an H200 it fills KL_T_S.
# (1) issue 26: J8, the judge of round 8's 4 kernels (then round 9 off the device, see README);
# (2) issue 25: sgemm in one process: the expert, the hand-merged tile tests (4.24 ms on the H100),
#     the kernel the emulator loop ends on with tile_groups, the s17 hand form, cuBLAS;
# (3) issue 25: sgemm's leave-one-out GPU loop, curriculum, budget 20, with tile_groups;
# (4) on an H200 only: issue 24's last line (the emu round's 375 kernels through the cuda protocol,
#     `r1/candidates.json`) and issue 25's emu-vs-H200 verdicts (the GPU loops' 87 compute-bound
#     kernels of the nineteenth and twentieth sessions, all emu-accepted, `loops/candidates.json`).
set -u
cd "$(dirname "$0")/.."
export OUT=${OUT:-/tmp/out}
source benchmarks/gpu_env.sh
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1); echo "$gpu"
t0=$SECONDS
T_S=${KL_T_S:-580}
R=benchmarks/results
judge() {  # out-folder deadline-s args...: one materialized_bench.py process
  local o=$1 d=$2; shift 2; mkdir -p "$o"
  KLINEAGE_HOME=/tmp/home_$(basename "$o") timeout $((d + 30)) python3 benchmarks/materialized_bench.py --suite corpus \
    --budget-s 0.2 --deadline-s "$d" --out "$o" "$@" > "$o/log.txt" 2>&1
  echo "judge $(basename "$o") rc=$? at $((SECONDS - t0)) s: $(grep -cE '^[a-z_0-9]+: naive' "$o/log.txt") workloads," \
    "$(grep -oE '\(([0-9]+) not ok\)' "$o/log.txt" | grep -oE '[0-9]+' | awk '{s += $1} END {print s + 0}') not ok"
}
judge $OUT/J8 90 --only reduce_sum,softmax_fp16 --extra .gpu/r8/candidates.json
mkdir -p $OUT/sgemm
KLINEAGE_HOME=/tmp/klh-t timeout 90 python3 -m klineage timings bench --workload expert_kernels/sgemm \
  --kernel expert=expert_kernels/sgemm/expert.cu --kernel merged=$R/2026-12-07-s19-pending/sgemm_loo_wt2_lb_merged.cu \
  --kernel groups=$R/2026-12-07-s20-gpu/sgemm_loo_emu_groups.cu --kernel hand=$R/2026-12-07-s17-pending/s17-exp/sgemm_loo_vec_lb.cu \
  --budget-s 0.5 --deadline-s 60 --out $OUT/sgemm > $OUT/sgemm.log 2>&1; echo "sgemm rc=$? at $((SECONDS - t0)) s"
grep -E "ms \(ok" $OUT/sgemm.log | tail -2
KLINEAGE_HOME=/tmp/home_loo_sgemm KL_JOBS=1 KL_MODES=curriculum KL_WORKLOADS=sgemm KL_BUDGET=20 \
  KL_MATERIALIZE_S=130 OUT=$OUT/loo/sgemm bash benchmarks/gpu_round.sh materialize > $OUT/loo_sgemm.txt 2>&1
echo "== loo sgemm at $((SECONDS - t0)) s"; grep -E "^sgemm \|" $OUT/loo_sgemm.txt
if [[ "$gpu" == *H200* ]]; then
  left=$((T_S - (SECONDS - t0)))
  judge $OUT/loops $((left / 3 - 30)) --only sgemm,gemm_bf16,attention_fwd --extra .gpu/loops/candidates.json
  left=$((T_S - (SECONDS - t0)))
  judge $OUT/r1 $((left - 40)) --extra .gpu/r1/candidates.json
  grep -E "distinct kernels" $OUT/r1/log.txt | tail -14
else
  echo "not an H200: issue 24's line and issue 25's H200 verdicts wait for one"
fi
for j in J8 loops r1; do [ -f $OUT/$j/materialized_bench.json ] && cp $OUT/$j/materialized_bench.json $OUT/${j}_bench.json; done
cp $OUT/sgemm/materialized_bench.json $OUT/sgemm_bench.json 2>/dev/null
(cd $OUT && tar czf callT.tgz --exclude='*.cu.o' --exclude='*.so' --exclude='*.cubin' --exclude='*.o' \
  --exclude='runs.duckdb*' $(ls -d J8 sgemm loo loops r1 2>/dev/null) && rm -rf J8 sgemm loo loops r1)
echo "done at $((SECONDS - t0)) s"
