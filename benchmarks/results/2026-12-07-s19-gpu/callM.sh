#!/usr/bin/env bash
# nineteenth session, call M (carry [".whl", ".gpu", ".devwork"]): (1) the sgemm kernels of
# .devwork/s19 (tile_packs' whole-tile form and launch_bounds' minBlocks step, both written by the
# operators on the s17 leave-one-out best) beside the expert, the hand edit and cuBLAS in one
# process; (2) sgemm's leave-one-out on the GPU loop (curriculum, budget 20) with the working tree.
set -u
cd "$(dirname "$0")/.."
export OUT=${OUT:-/tmp/out}
source benchmarks/gpu_env.sh
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
t0=$SECONDS
H=.devwork; mkdir -p $OUT/s19
KLINEAGE_HOME=/tmp/klh-s19 timeout 150 python3 -m klineage timings bench --workload expert_kernels/sgemm --kernel expert=expert_kernels/sgemm/expert.cu \
  --kernel loo=$H/s17-exp/sgemm_loo.cu --kernel loo_vec_lb_hand=$H/s17-exp/sgemm_loo_vec_lb.cu --kernel loo_wt=$H/s19/sgemm_loo_wt.cu \
  --kernel loo_wt_lb=$H/s19/sgemm_loo_wt_lb.cu --kernel loo_lb=$H/s19/sgemm_loo_lb.cu \
  --budget-s 0.5 --deadline-s 120 --out $OUT/s19/sgemm > $OUT/s19/sgemm.log 2>&1; echo "s19 sgemm rc=$? at $((SECONDS - t0)) s"
grep -E "ms|geomean" $OUT/s19/sgemm.log | tail -12
KLINEAGE_HOME=/tmp/home_loo KL_JOBS=1 KL_MODES=curriculum KL_WORKLOADS=sgemm KL_BUDGET=20 \
  KL_MATERIALIZE_S=${KL_LOO_S:-250} OUT=$OUT/loo bash benchmarks/gpu_round.sh materialize > $OUT/loo_stdout.txt 2>&1
echo "== loo at $((SECONDS - t0)) s"; tail -8 $OUT/loo_stdout.txt
(cd $OUT && tar czf callM.tgz --exclude='*.cu.o' --exclude='*.so' --exclude='*.cubin' --exclude='*.o' s19 loo) && rm -rf $OUT/s19 $OUT/loo
echo "done at $((SECONDS - t0)) s"
