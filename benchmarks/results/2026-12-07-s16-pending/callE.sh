#!/usr/bin/env bash
# sixteenth session: (1) `klineage heldout --backend cuda` (curriculum, budget default) on main with the
# start-kernel fallback, when KL_HO_S is set; (2) the helpers' scripts .devwork/<name>/run_gpu.sh in order.
set -u
cd "$(dirname "$0")/.."
export OUT=${OUT:-/tmp/out}
source benchmarks/gpu_env.sh
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; echo "main at $(cat .gpu/HEAD)"
t0=$SECONDS
# (1) and the compute-bound leave-one-out (sgemm, gemm_bf16, attention_fwd; curriculum; KL_LOO_BUDGET)
# side by side when KL_LOO_S is set: the cuda gate's device lock keeps their timings apart
if [ -n "${KL_HO_S:-}" ]; then
  KLINEAGE_HOME=/tmp/home_ho2 KL_JOBS=${KL_JOBS:-8} KL_HELDOUT_MODES=curriculum KL_HELDOUT_S=$KL_HO_S OUT=$OUT/ho2 \
    bash benchmarks/gpu_round.sh heldout > $OUT/ho2_stdout.txt 2>&1 &
fi
if [ -n "${KL_LOO_S:-}" ]; then
  KLINEAGE_HOME=/tmp/home_loo KL_JOBS=3 KL_MODES=curriculum KL_WORKLOADS=sgemm,gemm_bf16,attention_fwd \
    KL_BUDGET=${KL_LOO_BUDGET:-20} KL_MATERIALIZE_S=$KL_LOO_S OUT=$OUT/loo \
    bash benchmarks/gpu_round.sh materialize > $OUT/loo_stdout.txt 2>&1 &
fi
wait
for r in ho2 loo; do
  [ -f $OUT/${r}_stdout.txt ] || continue
  echo "== $r at $((SECONDS - t0)) s"; tail -${KL_TAIL:-24} $OUT/${r}_stdout.txt
  (cd $OUT && tar czf $r.tgz --exclude='*.cu.o' --exclude='*.so' --exclude='*.cubin' --exclude='*.o' $r) && rm -rf $OUT/$r
done
for ds in ${KL_DEV:-}; do  # name:seconds
  d=${ds%%:*}; s=${ds##*:}; echo "== $d ($s s) at $((SECONDS - t0)) s"
  LIMIT_S=$s timeout $((s + 15)) bash .devwork/$d/run_gpu.sh > $OUT/dev_$d.txt 2>&1; echo "$d rc=$?"
  tail -${KL_DEV_TAIL:-14} $OUT/dev_$d.txt
done
echo "done at $((SECONDS - t0)) s"
