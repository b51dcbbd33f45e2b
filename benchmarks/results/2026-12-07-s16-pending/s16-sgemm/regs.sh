#!/usr/bin/env bash
# CPU: registers and spills (large config, 128-bit path) of the variant files run_gpu.sh writes,
# with the cuda gate's nvcc flags: regs.txt, read by run_gpu.sh's table.
# usage: OUT=/tmp/x KL_DRY_RUN=1 bash .devwork/s16-sgemm/run_gpu.sh; bash .devwork/s16-sgemm/regs.sh /tmp/x/s16-sgemm/variants
set -u
cd "$(dirname "$0")/../.."
V=$1; R=.devwork/s16-sgemm/regs.txt; : > "$R"
for f in expert_kernels/sgemm/expert.cu "$V"/*.cu; do
  label=$(basename "$f" .cu)
  nvcc -O3 -std=c++17 -gencode=arch=compute_90a,code=sm_90a -cubin -Xptxas -v -o /tmp/regs_$label.cubin "$f" 2>&1 |
    python3 -c '
import re, sys
t = sys.stdin.read()
for m in re.finditer(r"sgemm_tiled(I[^ ]*?)EEvPKf.*?(\d+) bytes spill stores, (\d+) bytes spill loads\s*\n[^\n]*?Used (\d+) registers", t, re.S):
    a = re.findall(r"Li(\d+)E|Lb([01])E", m.group(1))
    if a[0][0] != "64" and a[-1][1] == "1":  # the large config, 128-bit path
        print(sys.argv[1], f"{m.group(4)} / {m.group(2)} B")
' "$label" >> "$R" &
done
wait
sort -o "$R" "$R"; cat "$R"
