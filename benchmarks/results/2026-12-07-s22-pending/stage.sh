#!/usr/bin/env bash
# Stages callV.sh (twenty-second session, not run: the device refused): mines the two Hopper variants
# backward on the CPU and writes every state of both lineages (expert first) to .gpu/hop/<workload>/,
# with the emulator's TMA fixture and two of its mutants in .gpu/hop/tma/. Run from the repository
# root after `make run`; then on the device: carry [".whl", ".gpu"], `KL_V_S=500 bash .gpu/callV.sh`.
set -euo pipefail
here=benchmarks/results/2026-12-07-s22-pending
corpus=$(mktemp -d)
for w in gemm_bf16 attention_fwd; do
  mkdir -p $corpus/${w}_hopper
  cp expert_kernels/$w/workload.py expert_kernels/$w/naive.cu $corpus/${w}_hopper/
  cp expert_kernels/$w/variants/expert_wgmma.cu $corpus/${w}_hopper/expert.cu
done
.venv/bin/python -m klineage mine $corpus --db $corpus/skills.duckdb --max-steps 60 --workers 2 --no-roundtrip
rm -rf .gpu/hop && mkdir -p .gpu/hop/tma
.venv/bin/python - "$corpus/skills.duckdb" <<'PY'
import sys
from pathlib import Path
from klineage.store.db import Store
from klineage.store.lineage import kernel_sources, taken_steps
with Store(sys.argv[1], read_only=True) as s:
    for w in ("gemm_bf16", "attention_fwd"):
        src, steps = kernel_sources(s, w), taken_steps(s, w)
        states = [steps[0]["from_state"]] + [r["to_state"] for r in steps]
        d = Path(".gpu/hop") / w
        d.mkdir(parents=True)
        for i, st in enumerate(states):
            (d / f"d{i:02d}_{st}.cu").write_text(src[st])
        print(w, len(states), "states:", " ".join(r["operator"] for r in steps))
good = Path("tests/kernels/emu/tma_scale/good.cu").read_text()
Path(".gpu/hop/tma/good.cu").write_text(good)
Path(".gpu/hop/tma/nowait.cu").write_text(good.replace("    wait_phase(bar, 0);\n", ""))
Path(".gpu/hop/tma/parity1.cu").write_text(good.replace("    wait_phase(bar, 0);\n", "    wait_phase(bar, 1);\n"))
PY
cp $here/callV.sh .gpu/callV.sh
[ -d .whl ] || bash benchmarks/gpu_setup.sh
