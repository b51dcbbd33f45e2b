#!/usr/bin/env bash
# s13-topk: topk naive vs the warp_per_row step (pass loop, sentinel butterfly) vs the emu
# leave-one-out best (warp_per_row, restrict, ldg, pragma_unroll, launch_bounds), timed on the GPU.
# About 40-70 s: kernel generation 2 s, emu materialize of topk about 20-30 s, timing about 20-30 s.
set -u
LIMIT_S=${LIMIT_S:-90}
D="$OUT/s13-topk"; mkdir -p "$D"
T0=$SECONDS
python3 - "$D/warp.cu" > "$D/forward.log" 2>&1 <<'PY'
import sys
from klineage.deopt.warp_per_row import WarpPerRow
from klineage.source.model import CudaSource
op = WarpPerRow()
src = CudaSource.from_file("expert_kernels/topk/naive.cu")
(site,) = op.find_forward(src)
open(sys.argv[1], "w").write(op.apply(src, site).text)
print("warp_per_row step written")
PY
timeout $((LIMIT_S / 2)) python3 benchmarks/materialize_bench.py --backend emu --budget 20 --modes curriculum \
  --workloads topk --db .gpu/skills.duckdb --out "$D/mat" > "$D/mat.log" 2>&1
echo "materialize rc=$? $((SECONDS - T0)) s" | tee -a "$D/summary.txt"
kernels=(--kernel warp="$D/warp.cu")
[ -f "$D/mat/topk/curriculum/best.cu" ] && kernels+=(--kernel best="$D/mat/topk/curriculum/best.cu")
left=$((LIMIT_S - (SECONDS - T0) - 5))
timeout $((left > 10 ? left : 10)) python3 benchmarks/materialized_bench.py --workload expert_kernels/topk \
  "${kernels[@]}" > "$D/bench.log" 2>&1
echo "bench rc=$? $((SECONDS - T0)) s" | tee -a "$D/summary.txt"
tail -4 "$D/mat.log"
tail -15 "$D/bench.log"
