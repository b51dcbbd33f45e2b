#!/usr/bin/env bash
# Stage the twentieth session's pending GPU work into `.gpu/` (from the repository root, after
# `make run`), then on the device, carry [".whl", ".gpu"]: `bash .gpu/callT.sh` (timeout_s 600).
#   everything ../2026-12-07-s19-pending/stage.sh stages (at720, store720, J1-J4, a_best, ...)
#   .gpu/J5.json, J6.json   call P's judges of rounds 5 and 6
#   .gpu/r8/                round 8 (the pooled judge), its 4 kernels without a judge time
#   .gpu/r1/, .gpu/r1ho/    the fifteenth session's emu round (207 + 168 kernels; issue 24 on an H200)
#   .gpu/loops/             the GPU loops' gated kernels of the nineteenth and twentieth sessions
#                           (compute-bound, 87; issue 25's emu-vs-H200 verdicts), candidates.json
set -eu
cd "$(dirname "$0")/../../.."
HERE=benchmarks/results/2026-12-07-s20-gpu
G=benchmarks/results
bash $G/2026-12-07-s19-pending/stage.sh
cp $HERE/callP_J5_bench.json .gpu/J5.json
cp $HERE/callP_J6_bench.json .gpu/J6.json
rm -rf .gpu/r8 .gpu/r1 .gpu/loops && tar xzf $HERE/r8.tgz -C .gpu && tar xzf $G/2026-12-06-s15-pending/r1.tgz -C .gpu
mkdir -p .gpu/loops/s20 .gpu/loops/s20a .gpu/loops/s19 .gpu/loops/s19a
# the completed loops only (each emu-checked, RESULTS): call Q's attention run was cut, as was call N's
tar xzf $HERE/callQ_callQ.tgz -C .gpu/loops/s20 --wildcards 'loo/sgemm/*/step-*.cu' 'loo/gemm_bf16/*/step-*.cu'
tar xzf $HERE/loo_attn.tgz -C .gpu/loops/s20a --wildcards '*/step-*.cu'
tar xzf $G/2026-12-07-s19-gpu/callN.tgz -C .gpu/loops/s19 --wildcards 'loo/sgemm/*/step-*.cu' 'loo/gemm_bf16/*/step-*.cu'
tar xzf $G/2026-12-07-s19-gpu/loo_attn.tgz -C .gpu/loops/s19a --wildcards '*/step-*.cu'
python3 - <<'PY'
import json
from pathlib import Path
root = Path(".gpu/loops")
files: dict[str, list[str]] = {}
for f in sorted(root.rglob("step-*.cu")):
    workload = f.parent.parent.name  # .../materialize/<workload>/curriculum/step-*.cu
    files.setdefault(workload, []).append(str(f.relative_to(root)))
(root / "candidates.json").write_text(json.dumps({"kind": "materializer-candidates", "files": files}, indent=1))
print("loops:", {w: len(v) for w, v in files.items()})
PY
cp $HERE/callT.sh $HERE/callU.sh .gpu/
# what callT does not need (the carry is 64 MiB with .whl and the tracked tree); round 9 runs here
# from `.gpu/at720` and `.gpu/store720.duckdb` (kept: 3 MB)
rm -rf .gpu/cpu7 .gpu/r4 .gpu/r5 .gpu/a_best .gpu/call[D-P].sh
du -sh .gpu .whl 2>/dev/null || true
