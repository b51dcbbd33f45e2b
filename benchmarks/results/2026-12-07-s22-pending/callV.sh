#!/usr/bin/env bash
# twenty-second session: the CPU-mined Hopper lineages' states (.gpu/hop/<workload>/dNN_<state>.cu,
# expert first) and the emulator's TMA fixture with two of its mutants, each through the cuda gate.
set -u
cd "$(dirname "$0")/.."
export OUT=${OUT:-/tmp/out}
source benchmarks/gpu_env.sh
nvidia-smi --query-gpu=name --format=csv,noheader | head -1
export KLINEAGE_HOME=/tmp/klh-v
mkdir -p $OUT/v
one() {  # file workload
  local b=$(basename $(dirname $1))_$(basename $1 .cu)
  timeout 240 python3 -m klineage gate "$1" -w "$2" --backend cuda --timeout 90 --json > $OUT/v/$b.json 2> $OUT/v/$b.err
}
export -f one
( for f in .gpu/hop/gemm_bf16/*.cu; do echo "$f expert_kernels/gemm_bf16"; done
  for f in .gpu/hop/attention_fwd/*.cu; do echo "$f expert_kernels/attention_fwd"; done
  for f in .gpu/hop/tma/*.cu; do echo "$f tests/kernels/emu/tma_scale"; done ) |
  timeout ${KL_V_S:-540} xargs -P 12 -L 1 bash -c 'one "$0" "$1"'
python3 - <<'PY'
import json, glob, os
rows = []
for p in sorted(glob.glob(os.environ["OUT"] + "/v/*.json")):
    try:
        d = json.load(open(p))
    except Exception as e:
        rows.append((os.path.basename(p), "no-json", str(e)[:60])); continue
    r = d[0] if isinstance(d, list) else d.get("results", [d])[0] if isinstance(d, dict) else d
    if isinstance(r, dict) and "results" in r: r = r["results"][0]
    rows.append((os.path.basename(p)[:-5], r.get("category") or ("ok" if r.get("accepted") else "?"), str(r.get("message", ""))[:90]))
for r in rows: print(" | ".join(r))
PY
(cd $OUT && tar czf callV.tgz v && rm -rf v)
