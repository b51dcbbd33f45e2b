#!/usr/bin/env bash
# Stage the seventeenth session's pending GPU inputs (on top of the sixteenth's) into the ignored
# folders a device call carries, from the repository root:
#     bash benchmarks/results/2026-12-07-s17-pending/stage.sh
# then `bash .gpu/callH.sh` on the device (carry [".whl", ".gpu", ".devwork"]).
#   .gpu/J1.json      the judge times of the emu round's kernels (seventeenth session, H100)
#   .gpu/r2/          the CPU round that read them (at 720d648): its kernels and candidates.json
#                     (102 kernels without a judge time)
#   .gpu/at720/       the source tree at 720d648 (operators of call A's GPU loop), so the device
#                     can run the next CPU rounds itself; .gpu/store720.duckdb its shipped store
#   .gpu/states/      the shipped store's lineage states that have no GPU time (corpus workloads
#                     of call A), roots first; roots.json indexes only each workload's first
set -eu
cd "$(dirname "$0")/../../.."
HERE=benchmarks/results/2026-12-07-s17-pending
PY=${PY:-.venv/bin/python}
bash benchmarks/results/2026-12-07-s16-pending/stage.sh
rm -rf .gpu/r2 .gpu/at720 .gpu/states
tar xzf $HERE/r2.tgz -C .gpu
cp benchmarks/results/2026-12-07-s17-gpu/j_loo_merged_bench.json .gpu/J1.json
cp $HERE/callH.sh .gpu/
mkdir -p .devwork/s17-exp && cp $HERE/s17-exp/* .devwork/s17-exp/
# klineage/ and the corpus at 720d648; gates/ and materialize/ come from the checkout (their emu
# paths are unchanged since 720d648: `git diff 720d648 -- materialize gates`), as in the local rounds
mkdir -p .gpu/at720
git archive 720d648 klineage expert_kernels skills_db benchmarks/materialize_bench.py | tar x -C .gpu/at720
rm -f .gpu/store720.duckdb
PYTHONPATH=.gpu/at720 $PY -c "from pathlib import Path; from klineage.export import shipped_store; \
shipped_store(Path('.gpu/store720.duckdb'), Path('.gpu/at720/skills_db'))"
# the lineage states come from the mined store (`make run` writes skills_db/skills.duckdb; the
# shipped store rebuilt from skills.jsonl holds skills only)
[ -f skills_db/skills.duckdb ] || { echo "stage.sh: run \`make run\` first (skills_db/skills.duckdb: the mined lineages)"; exit 2; }
$PY -m klineage timings export --untimed --db skills_db/skills.duckdb --out .gpu/states \
  --only softmax,softmax_fp16,rmsnorm,reduce_sum_rows,topk,layernorm,layernorm_bf16,attention_fwd,gemm_bf16,sgemm,reduce_sum
# roots.json: each workload's deepest untimed state alone (its lineage root when untimed; the bench
# goes through workloads alphabetically, so a deadline cuts the last ones)
$PY - <<'PY'
import json
from pathlib import Path
index = json.loads(Path(".gpu/states/index.json").read_text())
index["files"] = {w: v[:1] for w, v in index["files"].items() if v}
Path(".gpu/states/roots.json").write_text(json.dumps(index, indent=1))
PY
du -sh .gpu .devwork .whl 2>/dev/null || true
