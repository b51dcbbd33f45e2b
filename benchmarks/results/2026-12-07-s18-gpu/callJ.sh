#!/usr/bin/env bash
# eighteenth session, call J (one call where two were planned: starts were refused and the device
# time left allows one; carry [".whl", ".gpu", ".devwork"], staged by
# benchmarks/results/2026-12-07-s17-pending/stage.sh):
# (1) callH's first phase, side by side until KL_H1_S (170 s): the judge of the CPU round r2's 102
#     new kernels (J2); the re-mined store's untimed lineage roots (issue 23's corpus coverage);
#     the emu round's sgemm kernels again (issue 24's three unreached kernels);
# (2) sgemm's compute-bound leave-one-out (curriculum, budget 20) on the GPU loop with main's
#     operators, vectorize's tile_load_pack forward step among them (issue 25), KL_LOO_S;
# (3) .devwork/s17-exp (the hand edits beside the leave-one-out bests), KL_EXP_S.
set -u
cd "$(dirname "$0")/.."
export OUT=${OUT:-/tmp/out}
source benchmarks/gpu_env.sh
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; echo "main at $(cat .gpu/HEAD)"
t0=$SECONDS
H1=${KL_H1_S:-170}
W=reduce_sum,reduce_sum_rows,softmax,softmax_fp16,layernorm,layernorm_bf16,rmsnorm,transpose,transpose_batched,topk,sgemm,gemm_bf16,attention_fwd
judge() {  # out-folder deadline-s args...: one materialized_bench.py process
  local o=$1 d=$2; shift 2; mkdir -p "$o"
  KLINEAGE_HOME=/tmp/home_j$(basename "$o") timeout $((d + 20)) python3 benchmarks/materialized_bench.py --suite corpus \
    --budget-s 0.2 --deadline-s "$d" --out "$o" "$@" > "$o/log.txt" 2>&1
  echo "judge $(basename "$o") rc=$? at $((SECONDS - t0)) s: $(grep -cE '^[a-z_0-9]+: naive' "$o/log.txt") workloads"
}
mkdir -p $OUT/states
judge $OUT/J2 $((H1 - 20)) --only $W --extra .gpu/r2/candidates.json &
judge $OUT/jsg $((H1 - 20)) --only sgemm --extra .gpu/r1/candidates.json &
KLINEAGE_HOME=/tmp/home_s timeout $((H1 + 10)) python3 -m klineage timings bench --suite corpus \
  --extra .gpu/states/roots.json --budget-s 0.2 --deadline-s $((H1 - 20)) --out $OUT/states > $OUT/states/log.txt 2>&1 &
wait; echo "roots at $((SECONDS - t0)) s: $(grep -cE '^[a-z_0-9]+: naive' $OUT/states/log.txt) workloads"
grep -E "^[a-z_0-9]+: naive|geomean" $OUT/states/log.txt | tail -14
grep -E "distinct kernels|not ok" $OUT/jsg/log.txt | tail -3
(cd $OUT && tar czf callJ1.tgz --exclude='*.cu.o' --exclude='*.so' --exclude='*.cubin' --exclude='*.o' J2 jsg states && rm -rf J2 jsg states)
KLINEAGE_HOME=/tmp/home_loo KL_JOBS=1 KL_MODES=curriculum KL_WORKLOADS=sgemm KL_BUDGET=20 \
  KL_MATERIALIZE_S=${KL_LOO_S:-200} OUT=$OUT/loo bash benchmarks/gpu_round.sh materialize > $OUT/loo_stdout.txt 2>&1
echo "== loo at $((SECONDS - t0)) s"; tail -6 $OUT/loo_stdout.txt
(cd $OUT && tar czf loo.tgz --exclude='*.cu.o' --exclude='*.so' --exclude='*.cubin' --exclude='*.o' loo) && rm -rf $OUT/loo
s=${KL_EXP_S:-70}; echo "== s17-exp ($s s) at $((SECONDS - t0)) s"
LIMIT_S=$s timeout $((s + 15)) bash .devwork/s17-exp/run_gpu.sh > $OUT/dev_s17-exp.txt 2>&1; echo "s17-exp rc=$?"
tail -14 $OUT/dev_s17-exp.txt
(cd $OUT && tar czf s17-exp.tgz s17-exp && rm -rf s17-exp)
ls $OUT
echo "done at $((SECONDS - t0)) s"
