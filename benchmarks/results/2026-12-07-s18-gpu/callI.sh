#!/usr/bin/env bash
# eighteenth session, call I (on the machine callH warmed; carry [".whl", ".gpu", ".devwork"]):
# (1) sgemm's compute-bound leave-one-out (curriculum, budget 20) on the GPU loop with main's
#     operators, vectorize's new tile_load_pack forward step among them (issue 25);
# (2) the helpers' experiments .devwork/<name>/run_gpu.sh of KL_DEV (name:seconds), in order.
set -u
cd "$(dirname "$0")/.."
export OUT=${OUT:-/tmp/out}
source benchmarks/gpu_env.sh
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; echo "main at $(git rev-parse --short HEAD 2>/dev/null || cat .gpu/HEAD)"
t0=$SECONDS
if [ -n "${KL_LOO_S:-}" ]; then
  KLINEAGE_HOME=/tmp/home_loo KL_JOBS=1 KL_MODES=curriculum KL_WORKLOADS=${KL_LOO_W:-sgemm} KL_BUDGET=20 \
    KL_MATERIALIZE_S=$KL_LOO_S OUT=$OUT/loo bash benchmarks/gpu_round.sh materialize > $OUT/loo_stdout.txt 2>&1
  echo "== loo at $((SECONDS - t0)) s"; tail -8 $OUT/loo_stdout.txt
  (cd $OUT && tar czf loo.tgz --exclude='*.cu.o' --exclude='*.so' --exclude='*.cubin' --exclude='*.o' loo) && rm -rf $OUT/loo
fi
for ds in ${KL_DEV:-}; do
  d=${ds%%:*}; s=${ds##*:}; echo "== $d ($s s) at $((SECONDS - t0)) s"
  LIMIT_S=$s timeout $((s + 15)) bash .devwork/$d/run_gpu.sh > $OUT/dev_$d.txt 2>&1; echo "$d rc=$?"
  tail -${KL_DEV_TAIL:-14} $OUT/dev_$d.txt
done
echo "done at $((SECONDS - t0)) s"
