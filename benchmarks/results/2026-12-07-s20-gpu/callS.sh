#!/usr/bin/env bash
# twentieth session, call S (carry [".whl", ".gpu"]; `tar xzf benchmarks/results/2026-12-07-s20-gpu/r8.tgz
# -C .gpu` first): J8, the judge of the 4 kernels round 8 made under the pooled measured times
# (materialize/measured.py `_pooled`) and the one-sample spread (materialize/judge.py) that call
# R's table led to (.gpu/r8/candidates.json: reduce_sum 2, softmax_fp16 2).
set -u
cd "$(dirname "$0")/../../.."
export OUT=${OUT:-/tmp/out}
source benchmarks/gpu_env.sh
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
mkdir -p $OUT/J8
KLINEAGE_HOME=/tmp/home_j8 timeout 150 python3 benchmarks/materialized_bench.py --suite corpus --budget-s 0.2 \
  --deadline-s 120 --only reduce_sum,softmax_fp16 --extra .gpu/r8/candidates.json --out $OUT/J8 > $OUT/J8/log.txt 2>&1
echo "J8 rc=$?"; grep -E "^(reduce_sum|softmax_fp16): naive" $OUT/J8/log.txt; cp $OUT/J8/materialized_bench.json $OUT/J8_bench.json
