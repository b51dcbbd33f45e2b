#!/usr/bin/env bash
# fifteenth session, call C (warm machine after the loop call): leave-one-out random order, seeds
# 0-4, budget 10, on the ten memory-bound workloads (issue 24: curriculum vs random over the budget
# curve), with the loop call's gate cache; beside it, curriculum at budget 20 on the three
# compute-bound workloads (issue 25).
set -u
cd "$(dirname "$0")/.."
export OUT=${OUT:-/tmp/out}
source benchmarks/gpu_env.sh >/dev/null 2>&1
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; echo "main at $(cat .gpu/HEAD)"
t0=$SECONDS
MB=reduce_sum,reduce_sum_rows,softmax,softmax_fp16,layernorm,layernorm_bf16,rmsnorm,transpose,transpose_batched,topk
KLINEAGE_HOME=/tmp/home_loo KL_JOBS=10 KL_MODES=random KL_SEEDS=5 KL_WORKLOADS=$MB \
  KL_MATERIALIZE_S=${KL_C_S:-330} OUT=$OUT/r5 bash benchmarks/gpu_round.sh materialize > $OUT/r5_stdout.txt 2>&1 &
p1=$!
KLINEAGE_HOME=/tmp/home_c20 KL_JOBS=3 KL_MODES=curriculum KL_BUDGET=20 KL_WORKLOADS=sgemm,gemm_bf16,attention_fwd \
  KL_MATERIALIZE_S=${KL_C_S:-330} OUT=$OUT/c20 bash benchmarks/gpu_round.sh materialize > $OUT/c20_stdout.txt 2>&1 &
p2=$!
wait $p1; echo "random x5 done at $((SECONDS - t0)) s"; wait $p2; echo "compute b20 done at $((SECONDS - t0)) s"
(cd $OUT && tar czf /tmp/callC.tgz --exclude='*.cu.o' --exclude='*.so' --exclude='*.cubin' r5 c20) && rm -rf $OUT/r5 $OUT/c20 && cp /tmp/callC.tgz $OUT/
grep -E "^[a-z_0-9]+ +random|geomean" $OUT/r5_stdout.txt | tail -54; grep -E "^[a-z_0-9]+ +curriculum|geomean" $OUT/c20_stdout.txt | tail -5
