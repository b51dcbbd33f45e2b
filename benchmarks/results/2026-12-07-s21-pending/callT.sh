#!/usr/bin/env bash
# twenty-first session (staged by benchmarks/results/2026-12-07-s21-pending/stage.sh; carry [".whl", ".gpu"]):
# `KL_T_S=570 bash .gpu/callT.sh`, timeout_s 600. (1) issue 26: J8, the judge of round 8's 4 kernels.
# On an H200: (2) issue 24: the emu round's 375 kernels through the cuda protocol (r1/candidates.json);
# (3) issue 25: the GPU loops' 87 compute-bound kernels (loops/candidates.json). Otherwise: (2) sgemm
# in one process (expert, three new expert builds, the loop forms, cuBLAS); (3) the Hopper variants'
# backward steps timed beside them; (4) the Hopper variants mined backward on the cuda gate.
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
[ "${KL_J8:-1}" = 1 ] && judge $OUT/J8 90 --only reduce_sum,softmax_fp16 --extra .gpu/r8/candidates.json
if [[ "$gpu" == *H200* ]] && [ $T_S -gt 400 ]; then  # issue 24's line first (the emu round's 375 kernels), then issue 25's 87
  left=$((T_S - (SECONDS - t0)))
  judge $OUT/r1 $((left - 150)) --extra .gpu/r1/candidates.json
  grep -E "distinct kernels" $OUT/r1/log.txt | tail -14
  left=$((T_S - (SECONDS - t0)))
  judge $OUT/loops $((left - 45)) --only sgemm,gemm_bf16,attention_fwd --extra .gpu/loops/candidates.json
else
  mkdir -p $OUT/sgemm $OUT/hopper
  # issue 25: the wgmma fixture written here (threads copy the tiles) in five layouts, as written (the GPU's
  # reading of each descriptor) and with its wgmmas rewritten (the emulator's runs agree with these)
  ks=(); for f in .gpu/wg/plain_*.cu; do b=$(basename $f .cu); ks+=(--kernel "$b=$f"); done
  KLINEAGE_HOME=/tmp/klh-pl timeout 75 python3 -m klineage timings bench --workload tests/data/deopt/wgmma/plain_loads \
    "${ks[@]}" --budget-s 0.2 --deadline-s 55 --out $OUT/wg_plain > $OUT/wg_plain.log 2>&1
  echo "wg plain rc=$? at $((SECONDS - t0)) s"; grep -E "ms \(|: [a-z_]+ \(" $OUT/wg_plain.log | tail -12
  # issue 25: the Hopper variants' lineage steps (deopt/setmaxnreg.py, wgmma.py, tma.py; gemm: setmaxnreg,
  # wgmma, tma; attention: wgmma, setmaxnreg, tma -- its setmaxnreg step alone does not compile) beside them
  for w in gemm_bf16 attention_fwd; do
    [ $((T_S - (SECONDS - t0))) -gt 75 ] || break
    KLINEAGE_HOME=/tmp/klh-wg timeout 65 python3 -m klineage timings bench --workload expert_kernels/$w \
      --kernel hopper=expert_kernels/$w/variants/expert_wgmma.cu --kernel s1=.gpu/wg/${w}_s1.cu --kernel s2=.gpu/wg/${w}_s2.cu \
      --kernel expert=expert_kernels/$w/expert.cu --kernel s3=.gpu/wg/${w}_s3.cu --budget-s 0.3 --deadline-s 45 --out $OUT/wg_$w > $OUT/wg_$w.log 2>&1
    echo "wg $w rc=$? at $((SECONDS - t0)) s"; grep -E "ms \(|: [a-z_]+ \(" $OUT/wg_$w.log | tail -12
  done
  [ $((T_S - (SECONDS - t0))) -gt 110 ] && KLINEAGE_HOME=/tmp/klh-t timeout 80 python3 -m klineage timings bench --workload expert_kernels/sgemm \
    --kernel expert=expert_kernels/sgemm/expert.cu --kernel merged=$R/2026-12-07-s19-pending/sgemm_loo_wt2_lb_merged.cu \
    --kernel groups=$R/2026-12-07-s20-gpu/sgemm_loo_emu_groups.cu --kernel hand=$R/2026-12-07-s17-pending/s17-exp/sgemm_loo_vec_lb.cu --kernel raster=.gpu/sg/sgemm_raster.cu --kernel big=.gpu/sg/sgemm_big.cu --kernel lb1=.gpu/sg/sgemm_lb1.cu \
    --budget-s 0.3 --deadline-s 60 --out $OUT/sgemm > $OUT/sgemm.log 2>&1; echo "sgemm rc=$? at $((SECONDS - t0)) s"
  grep -E "ms \(ok|ms \(" $OUT/sgemm.log | tail -14
  # issue 25: the Hopper variants as experts, walked backward on the cuda gate (mine --backend cuda):
  # which of setmaxnreg, wgmma and tma the gate accepts, in which order, with their measured effect
  rm -rf /tmp/hc && mkdir -p /tmp/hc
  for w in gemm_bf16 attention_fwd; do
    mkdir -p /tmp/hc/${w}_hopper && cp expert_kernels/$w/workload.py expert_kernels/$w/naive.cu /tmp/hc/${w}_hopper/
    cp expert_kernels/$w/variants/expert_wgmma.cu /tmp/hc/${w}_hopper/expert.cu
  done
  left=$((T_S - (SECONDS - t0) - 25))
  if [ $left -gt 40 ]; then
    KLINEAGE_HOME=/tmp/klh-mine timeout $left python3 -m klineage mine /tmp/hc --backend cuda --db $OUT/hopper/skills.duckdb \
      --max-steps 14 --workers 6 --no-roundtrip --timeout 90 > $OUT/hopper_mine.log 2>&1
    echo "hopper mine rc=$? at $((SECONDS - t0)) s"; tail -25 $OUT/hopper_mine.log
  else
    echo "hopper mine: no time left ($left s)"
  fi
fi
for j in J8 loops r1; do [ -f $OUT/$j/materialized_bench.json ] && cp $OUT/$j/materialized_bench.json $OUT/${j}_bench.json; done
cp $OUT/sgemm/materialized_bench.json $OUT/sgemm_bench.json 2>/dev/null
(cd $OUT && tar czf callT.tgz --exclude='*.cu.o' --exclude='*.so' --exclude='*.cubin' --exclude='*.o' \
  --exclude='runs.duckdb*' $(ls -d J8 sgemm loops r1 wg_gemm_bf16 wg_attention_fwd wg_plain hopper 2>/dev/null) && rm -rf J8 sgemm loops r1 wg_gemm_bf16 wg_attention_fwd wg_plain hopper)
echo "done at $((SECONDS - t0)) s"
