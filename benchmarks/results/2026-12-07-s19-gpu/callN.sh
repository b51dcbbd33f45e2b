#!/usr/bin/env bash
# nineteenth session, call N (carry [".whl", ".gpu", ".devwork"]): (1) the sgemm kernels of
# .devwork/s19 again, tile_packs' cheaper once-a-tile test (wt2: the guard at two corners, the row
# stride read from the index) with and without launch_bounds' minBlocks, beside the expert, the
# hand edit and cuBLAS in one process; (2) the compute-bound leave-one-out on the GPU loop
# (curriculum, budget 20) for sgemm, attention_fwd and gemm_bf16 with the working tree, after issue
# 26's judge of round 4 (J4).
set -u
cd "$(dirname "$0")/.."
export OUT=${OUT:-/tmp/out}
source benchmarks/gpu_env.sh
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
t0=$SECONDS
H=.devwork; mkdir -p $OUT/s19
KLINEAGE_HOME=/tmp/klh-s19 timeout 120 python3 -m klineage timings bench --workload expert_kernels/sgemm --kernel expert=expert_kernels/sgemm/expert.cu \
  --kernel loo=$H/s17-exp/sgemm_loo.cu --kernel loo_vec_lb_hand=$H/s17-exp/sgemm_loo_vec_lb.cu --kernel loo_wt2=$H/s19/sgemm_loo_wt2.cu \
  --kernel loo_wt2_lb=$H/s19/sgemm_loo_wt2_lb.cu --kernel loo_lb=$H/s19/sgemm_loo_lb.cu \
  --budget-s 0.5 --deadline-s 90 --out $OUT/s19/sgemm > $OUT/s19/sgemm.log 2>&1; echo "s19 sgemm rc=$? at $((SECONDS - t0)) s"
grep -E "ms \(ok|geomean" $OUT/s19/sgemm.log | tail -8; cp $OUT/s19/sgemm/materialized_bench.json $OUT/s19_sgemm_bench.json
# issue 26: the judge J4 of the CPU round r4's 14 new kernels (r3 made 50, r2 102)
mkdir -p $OUT/J4
KLINEAGE_HOME=/tmp/home_j4 timeout 100 python3 benchmarks/materialized_bench.py --suite corpus --budget-s 0.2 --deadline-s 80 \
  --only reduce_sum_rows,sgemm,softmax,softmax_fp16,topk,transpose --extra .gpu/r4/candidates.json --out $OUT/J4 > $OUT/J4/log.txt 2>&1
echo "J4 rc=$? at $((SECONDS - t0)) s"; grep -E "distinct kernels" $OUT/J4/log.txt | tail -7; cp $OUT/J4/materialized_bench.json $OUT/J4_bench.json
for w in sgemm attention_fwd gemm_bf16; do  # one process each: a deadline loses one workload, not three
  KLINEAGE_HOME=/tmp/home_loo_$w KL_JOBS=1 KL_MODES=curriculum KL_WORKLOADS=$w KL_BUDGET=20 \
    KL_MATERIALIZE_S=${KL_LOO_S:-140} OUT=$OUT/loo/$w bash benchmarks/gpu_round.sh materialize > $OUT/loo_$w.txt 2>&1
  echo "== loo $w at $((SECONDS - t0)) s"; grep -E "^$w \|" $OUT/loo_$w.txt
done
(cd $OUT && tar czf callN.tgz --exclude='*.cu.o' --exclude='*.so' --exclude='*.cubin' --exclude='*.o' s19 loo J4) && rm -rf $OUT/s19 $OUT/loo $OUT/J4
echo "done at $((SECONDS - t0)) s"
