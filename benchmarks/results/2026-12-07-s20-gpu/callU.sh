#!/usr/bin/env bash
# staged in the twentieth session, not run; on an H200 only, right after callT.sh (same staging,
# carry [".whl", ".gpu"], timeout_s 600): issue 24's last line, the held-out half — the 168
# held-out kernels the emulator accepted in the fifteenth session's emu round (`.gpu/r1ho`) through
# the cuda protocol (callT.sh does the 207 leave-one-out ones). About 450 s (s17's callF on an H100).
set -u
cd "$(dirname "$0")/.."
export OUT=${OUT:-/tmp/out}
source benchmarks/gpu_env.sh
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
t0=$SECONDS
mkdir -p $OUT/jho
KLINEAGE_HOME=/tmp/home_jho timeout 560 python3 benchmarks/materialized_bench.py --suite heldout \
  --only gemv,histogram,l2norm,layernorm_fp32,logsumexp,maxpool2d,mean_var,rmsnorm_fp16,rotary,softmax_bf16_short,softmax_long,swiglu,transpose_fp16,transpose_tiny_batched \
  --extra .gpu/r1ho/index.json --budget-s 0.2 --deadline-s ${KL_U_S:-530} --out $OUT/jho > $OUT/jho/log.txt 2>&1
echo "jho rc=$? at $((SECONDS - t0)) s"; grep -E "distinct kernels" $OUT/jho/log.txt | tail -16
cp $OUT/jho/materialized_bench.json $OUT/jho_bench.json
(cd $OUT && tar czf callU.tgz --exclude='*.cu.o' --exclude='*.so' --exclude='*.cubin' --exclude='*.o' jho && rm -rf jho)
