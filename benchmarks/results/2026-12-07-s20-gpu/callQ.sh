#!/usr/bin/env bash
# twentieth session, call Q (carry [".whl", ".gpu"], timeout_s 600): issue 25 at one head in one call:
# (1) attention_fwd: the s19 GPU loop's leave-one-out best (attn_loo_gpu.cu) beside the same start
#     through the implied-bound rule (attn_loo_nb.cu), the expert and SDPA, one process;
# (1b) sgemm: whole-tile packs under the cap (wt2_lb), both tiles' tests in one dispatch by hand
#     (wt2_lb_merged), the s17 hand form, the expert and cuBLAS, one process;
# (2) the compute-bound leave-one-out on the GPU loop (curriculum, budget 20) for attention_fwd,
#     sgemm and gemm_bf16 with the working tree, one process each.
set -u
cd "$(dirname "$0")/../../.."
export OUT=${OUT:-/tmp/out}
source benchmarks/gpu_env.sh
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
t0=$SECONDS
P=benchmarks/results/2026-12-07-s19-pending
S17=benchmarks/results/2026-12-07-s17-pending/s17-exp
mkdir -p $OUT/attn $OUT/sgemm
KLINEAGE_HOME=/tmp/klh-q timeout 90 python3 -m klineage timings bench --workload expert_kernels/attention_fwd \
  --kernel expert=expert_kernels/attention_fwd/expert.cu --kernel loo_gpu=$P/attn_loo_gpu.cu --kernel loo_nb=$P/attn_loo_nb.cu \
  --budget-s 0.5 --deadline-s 70 --out $OUT/attn > $OUT/attn.log 2>&1; echo "attn rc=$? at $((SECONDS - t0)) s"
grep -E "ms \(ok|geomean" $OUT/attn.log | tail -5; cp $OUT/attn/materialized_bench.json $OUT/attn_bench.json
KLINEAGE_HOME=/tmp/klh-q timeout 80 python3 -m klineage timings bench --workload expert_kernels/sgemm \
  --kernel expert=expert_kernels/sgemm/expert.cu --kernel loo=$S17/sgemm_loo.cu --kernel wt2_lb=$P/sgemm_loo_wt2_lb.cu \
  --kernel wt2_lb_merged=$P/sgemm_loo_wt2_lb_merged.cu --kernel hand=$S17/sgemm_loo_vec_lb.cu \
  --budget-s 0.5 --deadline-s 60 --out $OUT/sgemm > $OUT/sgemm.log 2>&1; echo "sgemm rc=$? at $((SECONDS - t0)) s"
grep -E "ms \(ok" $OUT/sgemm.log | tail -2; cp $OUT/sgemm/materialized_bench.json $OUT/sgemm_bench.json
for ws in attention_fwd:220 sgemm:110 gemm_bf16:85; do  # one process each
  w=${ws%%:*}; s=${ws##*:}; left=$((585 - (SECONDS - t0))); [ $s -gt $((left - 10)) ] && s=$((left - 10))
  [ $s -lt 40 ] && { echo "== loo $w: not started ($left s left)"; continue; }
  KLINEAGE_HOME=/tmp/home_loo_$w KL_JOBS=1 KL_MODES=curriculum KL_WORKLOADS=$w KL_BUDGET=20 \
    KL_MATERIALIZE_S=$s OUT=$OUT/loo/$w bash benchmarks/gpu_round.sh materialize > $OUT/loo_$w.txt 2>&1
  echo "== loo $w at $((SECONDS - t0)) s (limit $s)"; grep -E "^$w \|" $OUT/loo_$w.txt
done
(cd $OUT && tar czf callQ.tgz --exclude='*.cu.o' --exclude='*.so' --exclude='*.cubin' --exclude='*.o' attn sgemm loo) && rm -rf $OUT/attn $OUT/sgemm $OUT/loo
echo "done at $((SECONDS - t0)) s"
