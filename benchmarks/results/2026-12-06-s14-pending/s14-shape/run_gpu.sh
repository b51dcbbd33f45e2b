#!/usr/bin/env bash
# s14-shape (issue 24): in one GPU process, checked on the test shapes and timed at the bench shape
# beside naive.cu and torch: the held-out instances whose emu curriculum kernel this branch changes.
# before = main's code (shipped store), after = this branch (block_per_row sizes its block from the
# row length: softmax_long 64 -> 1024 threads, cross_entropy 128 -> 512). b256/b512/b1024 = the after
# kernel with only its block (launch constant and __launch_bounds__) set to 256/512/1024, to place
# the rule's choice among its neighbours. The other 21 held-out kernels are byte-identical to main's.
# Run from the repo root; honours $LIMIT_S (default 90); logs under $OUT/s14-shape/.
set -u
T0=$(date +%s)
LIMIT=${LIMIT_S:-90}
D=.devwork/s14-shape/ho
O="$OUT/s14-shape"; mkdir -p "$O"
export KLINEAGE_HOME=${KLINEAGE_HOME:-/tmp/klh-s14-shape}
{ nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; git rev-parse --short HEAD 2>/dev/null; } > "$O/env.txt" 2>&1
WL=(); for n in softmax_long cross_entropy; do WL+=(--workload "heldout/$n"); done
LEFT=$(( LIMIT - 6 - ($(date +%s) - T0) ))
timeout "$LEFT" python3 benchmarks/materialized_bench.py "${WL[@]}" \
  --run "before=$D/before/{name}/best.cu" --run "after=$D/after/{name}/best.cu" \
  --run "b256=$D/b256/{name}/best.cu" --run "b512=$D/b512/{name}/best.cu" --run "b1024=$D/b1024/{name}/best.cu" \
  --budget-s 0.25 --deadline-s $(( LEFT - 10 )) --out "$O" > "$O/bench.log" 2>&1
echo "rc=$? wall $(( $(date +%s) - T0 )) s" >> "$O/bench.log"
cat "$O/env.txt"; grep -E '^[a-z_0-9]+: naive|not ok|^rc=' "$O/bench.log" | tail -12
sed -n '/^| workload/,$p' "$O/bench.log" | tail -20
grep -q '^| workload' "$O/bench.log" || tail -25 "$O/bench.log"
