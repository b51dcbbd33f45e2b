#!/usr/bin/env bash
# s13-elementwise (issue 24): in one H200 process, checked on the test shapes and timed at the bench
# shape beside naive.cu and torch: the held-out instances whose emu curriculum kernel this branch
# changes. before = main's code (shipped store), after = this branch (grid_stride refuses plain maps;
# ldg refuses window reads). maxpool2d also times its chain step by step to find the costly step:
# r (restrict), rl (+ldg), rlp (+pragma_unroll), before (+launch_bounds), after (restrict,
# pragma_unroll, launch_bounds), plb (after without __restrict__: pragma_unroll, launch_bounds).
# Run from the repo root; honours $LIMIT_S (default 90); logs under $OUT/s13-elementwise/.
set -u
T0=$(date +%s)
LIMIT=${LIMIT_S:-90}
D=.devwork/s13-elementwise/ho
O="$OUT/s13-elementwise"; mkdir -p "$O"
export KLINEAGE_HOME=${KLINEAGE_HOME:-/tmp/klh-s13-elementwise}
{ nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; git rev-parse --short HEAD 2>/dev/null; } > "$O/env.txt" 2>&1
WL=(); for n in axpy embedding gelu_bias rotary swiglu maxpool2d; do WL+=(--workload "heldout/$n"); done
LEFT=$(( LIMIT - 6 - ($(date +%s) - T0) ))
timeout "$LEFT" python3 benchmarks/materialized_bench.py "${WL[@]}" \
  --run "before=$D/before/{name}/best.cu" --run "after=$D/after/{name}/best.cu" \
  --run "r=$D/r/{name}/best.cu" --run "rl=$D/rl/{name}/best.cu" --run "rlp=$D/rlp/{name}/best.cu" \
  --run "plb=$D/plb/{name}/best.cu" \
  --budget-s 0.25 --deadline-s $(( LEFT - 10 )) --out "$O" > "$O/bench.log" 2>&1
echo "rc=$? wall $(( $(date +%s) - T0 )) s" >> "$O/bench.log"
cat "$O/env.txt"; grep -E '^[a-z_0-9]+: naive|not ok|^rc=' "$O/bench.log" | tail -12
sed -n '/^| workload/,$p' "$O/bench.log" | tail -20
grep -q '^| workload' "$O/bench.log" || tail -25 "$O/bench.log"
