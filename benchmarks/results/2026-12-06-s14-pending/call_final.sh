#!/usr/bin/env bash
# fourteenth session's last call: s14-flash's tensor-core flash kernel vs SDPA (issue 25), then the
# two loops side by side for as long as is left (issue 26: no retirement for the other's memory)
set -u
cd "$(dirname "$0")/.."
export OUT=${OUT:-/tmp/out}
source benchmarks/gpu_env.sh
LIMIT_S=${FLASH_S:-95} timeout $(( ${FLASH_S:-95} + 10 )) bash .devwork/s14-flash/run_gpu.sh > $OUT/flash_stdout.txt 2>&1
echo "== flash"; cat $OUT/s14-flash/table.txt
KL_S=${KL_S:-60} bash .gpu/call26.sh > $OUT/loop_stdout.txt 2>&1
echo "== loop"; grep -E "retired|gates, span|run_s|candidate_s|first_look|health_s|loo done|heldout done" $OUT/loop_stdout.txt | head -20
grep -E "^[a-z_0-9]+ +(curriculum|random|none)" $OUT/loop_stdout.txt | head -20
