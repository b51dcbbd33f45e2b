#!/usr/bin/env bash
# issue 26: the materializer's loop on the GPU in one call (leave-one-out curriculum/random/none, budget 10) + held-out on cuda
set -u
cd "$(dirname "$0")/.."
export OUT=${OUT:-/tmp/out}
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
python3 -c "import torch; print('torch', torch.__version__)"
t0=$SECONDS
KL_JOBS=${KL_JOBS:-12} KL_MODES=curriculum,random,none KL_MATERIALIZE_S=${KL_MATERIALIZE_S:-360} KL_HELDOUT_S=${KL_HELDOUT_S:-85} \
  OUT=$OUT/r bash benchmarks/gpu_round.sh materialize heldout > $OUT/round_stdout.txt 2>&1
echo "wall $((SECONDS - t0)) s"
(cd $OUT/r && tar czf $OUT/round.tgz --exclude='*.cu.o' --exclude='*.so' .)
ls -la $OUT/round.tgz
tail -80 $OUT/round_stdout.txt
