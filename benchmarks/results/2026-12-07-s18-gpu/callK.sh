#!/usr/bin/env bash
# eighteenth session, call K (carry [".whl", ".gpu"]): issue 23's corpus coverage in one process,
# on one device: every corpus workload's naive kernel, expert (the lineage's first state) and root
# (its last) from `.gpu/allstates/ends.json` (`klineage timings export` of the mined store, each
# workload's first and last file), beside torch. Back here: `klineage timings import` into a copy
# of the store, then `klineage timings coverage` (one device: the newest import's).
set -u
cd "$(dirname "$0")/.."
export OUT=${OUT:-/tmp/out}
source benchmarks/gpu_env.sh
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; echo "main at $(cat .gpu/HEAD)"
mkdir -p $OUT/ends
KLINEAGE_HOME=/tmp/home_e timeout $((${KL_K_S:-260} + 20)) python3 -m klineage timings bench --suite corpus \
  --extra .gpu/allstates/ends.json --budget-s 0.3 --deadline-s ${KL_K_S:-260} --out $OUT/ends > $OUT/ends/log.txt 2>&1
echo "rc=$?"; grep -E "^[a-z_0-9]+: naive" $OUT/ends/log.txt
cp $OUT/ends/materialized_bench.json $OUT/ends_bench.json; cp $OUT/ends/log.txt $OUT/ends_log.txt; rm -rf $OUT/ends
