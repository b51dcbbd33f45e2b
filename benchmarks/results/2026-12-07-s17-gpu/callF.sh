#!/usr/bin/env bash
# seventeenth session, call F (run inline on the warm machine after callD and callE of
# ../2026-12-07-s16-pending/): the judges' workloads callD's deadline left out, beside the
# compute-bound leave-one-out of attention_fwd (budget 20) that callE's KL_LOO_S cut off.
export OUT=${OUT:-/tmp/out}; source benchmarks/gpu_env.sh; nvidia-smi --query-gpu=name --format=csv,noheader; t0=$SECONDS
mkdir -p $OUT/j_loo2 $OUT/j_ho2
KLINEAGE_HOME=/tmp/home_j timeout 450 python3 benchmarks/materialized_bench.py --suite corpus --only softmax,softmax_fp16,topk,transpose,transpose_batched --extra .gpu/r1/candidates.json --run "curriculum=.gpu/a_best/curriculum/{name}/best.cu" --run "random=.gpu/a_best/random/{name}/best.cu" --run "none=.gpu/a_best/none/{name}/best.cu" --budget-s 0.2 --deadline-s 420 --out $OUT/j_loo2 > $OUT/j_loo2/log.txt 2>&1 &
KLINEAGE_HOME=/tmp/home_jho timeout 450 python3 benchmarks/materialized_bench.py --suite heldout --only gemv,histogram,l2norm,layernorm_fp32,logsumexp,maxpool2d,mean_var,rmsnorm_fp16,rotary,softmax_bf16_short,softmax_long,swiglu,transpose_fp16,transpose_tiny_batched --extra .gpu/r1ho/index.json --run "ho=.gpu/a_best/ho/{name}/best.cu" --budget-s 0.2 --deadline-s 420 --out $OUT/j_ho2 > $OUT/j_ho2/log.txt 2>&1 &
KLINEAGE_HOME=/tmp/home_loo KL_JOBS=1 KL_MODES=curriculum KL_WORKLOADS=attention_fwd KL_BUDGET=20 KL_MATERIALIZE_S=430 OUT=$OUT/loo2 bash benchmarks/gpu_round.sh materialize > $OUT/loo2_stdout.txt 2>&1 &
wait; echo "all at $((SECONDS-t0)) s"
tail -20 $OUT/loo2_stdout.txt
grep -E "distinct kernels|not ok|geomean" $OUT/j_loo2/log.txt | tail -12; grep -E "distinct kernels|geomean" $OUT/j_ho2/log.txt | tail -16
cd $OUT && tar czf callF.tgz --exclude='*.cu.o' --exclude='*.so' --exclude='*.cubin' --exclude='*.o' j_loo2 j_ho2 loo2 && rm -rf j_loo2 j_ho2 loo2
