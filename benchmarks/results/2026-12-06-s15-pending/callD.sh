#!/usr/bin/env bash
# fifteenth session, final call: (1) the emu round's accepted candidates (leave-one-out .gpu/r1,
# held-out .gpu/r1ho) checked and timed on the GPU beside call A's best kernels (.gpu/a_best),
# one process per suite: emu vs GPU verdicts, the CPU round's measured times, call A's figures
# measured apart; (2) `klineage heldout --backend cuda` again (the start-kernel fallback);
# both side by side for KL_D_S s; (3) the helpers' scripts, .devwork/*/run_gpu.sh, in order.
set -u
cd "$(dirname "$0")/.."
export OUT=${OUT:-/tmp/out}
source benchmarks/gpu_env.sh
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; echo "main at $(cat .gpu/HEAD)"
t0=$SECONDS
D_S=${KL_D_S:-240}
W=reduce_sum,reduce_sum_rows,softmax,softmax_fp16,layernorm,layernorm_bf16,rmsnorm,transpose,transpose_batched,topk,sgemm,gemm_bf16,attention_fwd
runs=(--run "curriculum=.gpu/a_best/curriculum/{name}/best.cu" --run "random=.gpu/a_best/random/{name}/best.cu"
      --run "none=.gpu/a_best/none/{name}/best.cu")
mkdir -p $OUT/j_loo $OUT/j_ho
KLINEAGE_HOME=/tmp/home_j timeout $((D_S + 15)) python3 benchmarks/materialized_bench.py --suite corpus --only $W \
  --extra .gpu/r1/candidates.json "${runs[@]}" --budget-s 0.2 --deadline-s $((D_S - 15)) --out $OUT/j_loo > $OUT/j_loo/log.txt 2>&1 &
p1=$!
KLINEAGE_HOME=/tmp/home_jho timeout $((D_S + 15)) python3 benchmarks/materialized_bench.py --suite heldout \
  --extra .gpu/r1ho/index.json --run "ho=.gpu/a_best/ho/{name}/best.cu" --budget-s 0.2 --deadline-s $((D_S - 15)) \
  --out $OUT/j_ho > $OUT/j_ho/log.txt 2>&1 &
p2=$!
if [ -n "${KL_HO2:-}" ]; then
  KLINEAGE_HOME=/tmp/home_ho2 KL_JOBS=8 KL_HELDOUT_MODES=curriculum KL_HELDOUT_S=$D_S OUT=$OUT/ho2 \
    bash benchmarks/gpu_round.sh heldout > $OUT/ho2_stdout.txt 2>&1
fi &
p3=$!
wait $p1; echo "judge loo rc=$? at $((SECONDS - t0)) s"; wait $p2; echo "judge ho rc=$? at $((SECONDS - t0)) s"
wait $p3; echo "heldout at $((SECONDS - t0)) s"
for ds in ${KL_DEV:-}; do  # name:seconds
  d=${ds%%:*}; s=${ds##*:}; echo "== $d ($s s) at $((SECONDS - t0)) s"
  LIMIT_S=$s timeout $((s + 15)) bash .devwork/$d/run_gpu.sh > $OUT/dev_$d.txt 2>&1; echo "$d rc=$?"
  tail -${KL_DEV_TAIL:-14} $OUT/dev_$d.txt
done
(cd $OUT && tar czf /tmp/callD.tgz --exclude='*.cu.o' --exclude='*.so' --exclude='*.cubin' j_loo j_ho $(ls -d ho2 2>/dev/null)) && rm -rf $OUT/ho2 && cp /tmp/callD.tgz $OUT/
echo "== judge"; grep -E "distinct kernels|not ok|geomean" $OUT/j_loo/log.txt | tail -8; grep -E "distinct kernels|not ok|geomean" $OUT/j_ho/log.txt | tail -5
[ -f $OUT/ho2_stdout.txt ] && { echo "== heldout"; tail -2 $OUT/ho2_stdout.txt; }; echo "done at $((SECONDS - t0)) s"
