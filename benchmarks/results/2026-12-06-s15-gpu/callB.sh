#!/usr/bin/env bash
# fifteenth session, call B (chained on the warm machine after the loop call): s14-flash's
# tensor-core flash kernel vs SDPA (issue 25), s14-shape's held-out block sizes (issue 24), then
# leave-one-out curriculum at budget 20 on the ten memory-bound workloads (issue 24), KL_B20_S s.
set -u
cd "$(dirname "$0")/.."
export OUT=${OUT:-/tmp/out}
source benchmarks/gpu_env.sh
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; echo "main at $(cat .gpu/HEAD)"
t0=$SECONDS
LIMIT_S=${FLASH_S:-95} timeout $(( ${FLASH_S:-95} + 10 )) bash .devwork/s14-flash/run_gpu.sh > $OUT/flash_stdout.txt 2>&1
echo "flash done at $((SECONDS - t0)) s"
LIMIT_S=${SHAPE_S:-80} timeout $(( ${SHAPE_S:-80} + 10 )) bash .devwork/s14-shape/run_gpu.sh > $OUT/shape_stdout.txt 2>&1
echo "shape done at $((SECONDS - t0)) s"
MB=reduce_sum,reduce_sum_rows,softmax,softmax_fp16,layernorm,layernorm_bf16,rmsnorm,transpose,transpose_batched,topk
KLINEAGE_HOME=/tmp/home_b20 KL_JOBS=8 KL_MODES=curriculum KL_BUDGET=20 KL_WORKLOADS=$MB \
  KL_MATERIALIZE_S=${KL_B20_S:-300} OUT=$OUT/b20 bash benchmarks/gpu_round.sh materialize > $OUT/b20_stdout.txt 2>&1
echo "budget 20 done at $((SECONDS - t0)) s"
python3 benchmarks/gate_stages.py $OUT/b20/materialize/runs.duckdb /tmp/home_b20/resident-worker.log > $OUT/b20_stages.txt 2>&1
(cd $OUT && tar czf /tmp/callB.tgz --exclude='*.cu.o' --exclude='*.so' --exclude='*.cubin' b20 s14-flash s14-shape) && rm -rf $OUT/b20 && cp /tmp/callB.tgz $OUT/
echo "== flash"; cat $OUT/s14-flash/table.txt 2>/dev/null | tail -14
echo "== shape"; tail -16 $OUT/shape_stdout.txt
echo "== budget 20"; grep -E "^[a-z_0-9]+ +curriculum|geomean" $OUT/b20_stdout.txt | tail -14; head -8 $OUT/b20_stages.txt
