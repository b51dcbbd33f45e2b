#!/usr/bin/env bash
# nineteenth session, call L (carry [".whl", ".gpu"]): (1) call K, issue 23's corpus coverage
# (naive, expert and root of every corpus workload in one process); (2) issue 26's judge J3 of the
# CPU round r3's 50 new kernels, the five workloads J2's deadline cut first, the rest after.
set -u
cd "$(dirname "$0")/.."
export OUT=${OUT:-/tmp/out}
source benchmarks/gpu_env.sh
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; echo "main at $(cat .gpu/HEAD)"
t0=$SECONDS
mkdir -p $OUT/ends
KLINEAGE_HOME=/tmp/home_e timeout $((${KL_K_S:-170} + 20)) python3 -m klineage timings bench --suite corpus \
  --extra .gpu/allstates/ends.json --budget-s 0.3 --deadline-s ${KL_K_S:-170} --out $OUT/ends > $OUT/ends/log.txt 2>&1
echo "K rc=$? at $((SECONDS - t0)) s"; grep -E "^[a-z_0-9]+: naive" $OUT/ends/log.txt
cp $OUT/ends/materialized_bench.json $OUT/ends_bench.json; cp $OUT/ends/log.txt $OUT/ends_log.txt; rm -rf $OUT/ends
judge() {  # out-folder deadline-s args...: one materialized_bench.py process
  local o=$1 d=$2; shift 2; mkdir -p "$o"
  KLINEAGE_HOME=/tmp/home_j$(basename "$o") timeout $((d + 20)) python3 benchmarks/materialized_bench.py --suite corpus \
    --budget-s 0.2 --deadline-s "$d" --out "$o" "$@" > "$o/log.txt" 2>&1
  echo "judge $(basename "$o") rc=$? at $((SECONDS - t0)) s: $(grep -cE '^[a-z_0-9]+: naive' "$o/log.txt") workloads"
}
judge $OUT/J3a ${KL_A_S:-150} --only softmax,softmax_fp16,topk,transpose,transpose_batched --extra .gpu/r3/candidates.json
judge $OUT/J3b ${KL_B_S:-130} --only reduce_sum,reduce_sum_rows,layernorm,layernorm_bf16,rmsnorm,sgemm,gemm_bf16,attention_fwd --extra .gpu/r3/candidates.json
for j in J3a J3b; do grep -E "distinct kernels|not ok" $OUT/$j/log.txt | tail -3; cp $OUT/$j/materialized_bench.json $OUT/${j}_bench.json; done
(cd $OUT && tar czf callL_J3.tgz --exclude='*.cu.o' --exclude='*.so' --exclude='*.cubin' --exclude='*.o' J3a J3b && rm -rf J3a J3b)
ls $OUT; echo "done at $((SECONDS - t0)) s"
