#!/usr/bin/env bash
# Stage every pending GPU input of the fifteenth and sixteenth sessions into the ignored folders a
# device call carries (.gpu, .devwork), from the repository root:
#     bash benchmarks/results/2026-12-07-s16-pending/stage.sh
# then run the calls of this folder's README. The public lineages' wrappers that s15-walks times
# (.devwork/s15-walks/lineages/) are never committed: re-create them as RESULTS' "s15-walks"
# section says when they are missing (the script says so).
set -eu
cd "$(dirname "$0")/../../.."
S15=benchmarks/results/2026-12-06-s15-pending
S16=benchmarks/results/2026-12-07-s16-pending
mkdir -p .gpu .devwork
tar xzf $S15/a_best.tgz -C .gpu
tar xzf $S15/r1.tgz -C .gpu
cp $S15/callD.sh $S16/callE.sh .gpu/
for d in s15-hopper s15-walks; do mkdir -p .devwork/$d && cp $S15/$d/* .devwork/$d/; done
for d in s15-flashmma s15-gemmfwd; do
  mkdir -p .devwork/$d && cp benchmarks/results/2026-12-06-$d/run_gpu.sh .devwork/$d/
done
rm -rf .devwork/s15-gemmfwd/kernels && cp -r benchmarks/results/2026-12-06-s15-gemmfwd/kernels .devwork/s15-gemmfwd/
for d in s16-sgemm s16-attnwgmma s16-attnknobs; do mkdir -p .devwork/$d && cp $S16/$d/* .devwork/$d/; done
PY=${PY:-.venv/bin/python}
rm -f .gpu/skills.duckdb && $PY -c "from pathlib import Path; from klineage.export import shipped_store; shipped_store(Path('.gpu/skills.duckdb'))"
git rev-parse --short HEAD > .gpu/HEAD
[ -d .devwork/s15-walks/lineages ] || echo "missing: .devwork/s15-walks/lineages (the public lineages' wrappers; RESULTS, s15-walks)"
du -sh .gpu .devwork .whl 2>/dev/null || true
