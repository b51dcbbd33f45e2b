#!/usr/bin/env bash
# issue 26: in one call, the materializer's leave-one-out loop on cuda (17 workloads x curriculum,
# random seed 0, none; budget 10) and `klineage heldout --backend cuda` (23 instances, curriculum),
# the two side by side (builds in parallel; GPU work takes turns through the host-wide device lock)
set -u
cd "$(dirname "$0")/.."
export OUT=${OUT:-/tmp/out}
source benchmarks/gpu_env.sh
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
python3 -c "import torch; print('torch', torch.__version__)"
git_head=$(cat .gpu/HEAD 2>/dev/null); echo "main at $git_head"
t0=$SECONDS
KLINEAGE_HOME=/tmp/home_loo KL_JOBS=${KL_LOO_JOBS:-10} KL_MODES=curriculum,random,none KL_MATERIALIZE_S=${KL_S:-500} \
  OUT=$OUT/loo bash benchmarks/gpu_round.sh materialize > $OUT/loo_stdout.txt 2>&1 &
p1=$!
KLINEAGE_HOME=/tmp/home_ho KL_JOBS=${KL_HO_JOBS:-6} KL_HELDOUT_MODES=curriculum KL_HELDOUT_S=${KL_S:-500} \
  OUT=$OUT/ho bash benchmarks/gpu_round.sh heldout > $OUT/ho_stdout.txt 2>&1 &
p2=$!
wait $p1; echo "loo done at $((SECONDS - t0)) s"
wait $p2; echo "heldout done at $((SECONDS - t0)) s"
cp /tmp/home_ho/resident-worker.log $OUT/ho/worker.log 2>/dev/null
(cd $OUT && tar czf /tmp/call26.tgz --exclude='*.cu.o' --exclude='*.so' --exclude='*.cubin' loo ho loo_stdout.txt ho_stdout.txt)
rm -rf $OUT/loo $OUT/ho; cp /tmp/call26.tgz $OUT/
tail -40 $OUT/loo_stdout.txt; tail -40 $OUT/ho_stdout.txt
ls -la $OUT
