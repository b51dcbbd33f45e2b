#!/usr/bin/env bash
# Stage the twenty-first session's pending GPU work into `.gpu/` (from the repository root, after
# `make run`), then on the device, carry [".whl", ".gpu"]: `KL_T_S=570 bash .gpu/callT.sh` (timeout_s 600).
#   everything ../2026-12-07-s20-gpu/stage.sh stages (J1-J6, r8, r1, loops, at720, store720)
#   .gpu/sg/   three sgemm expert builds to time beside it (grouped raster; 256 x 128 tiles; no register cap)
#   .gpu/wg/   the Hopper variants' backward steps (hopper_steps.py)
set -eu
cd "$(dirname "$0")/../../.."
HERE=benchmarks/results/2026-12-07-s21-pending
bash benchmarks/results/2026-12-07-s20-gpu/stage.sh
mkdir -p .gpu/sg && cp $HERE/sgemm_*.cu .gpu/sg/
.venv/bin/python $HERE/hopper_steps.py .gpu/wg
cp $HERE/callT.sh .gpu/callT.sh
du -sh .gpu .whl 2>/dev/null || true
