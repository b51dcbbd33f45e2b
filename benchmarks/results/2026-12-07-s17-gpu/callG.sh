#!/usr/bin/env bash
# seventeenth session, call G: `klineage heldout --backend cuda` (curriculum, main 65ce387 with the
# start-kernel fallback) over the 14 instances that callE's KL_HO_S=170 did not finish.
export OUT=${OUT:-/tmp/out}; source benchmarks/gpu_env.sh; nvidia-smi --query-gpu=name --format=csv,noheader; t0=$SECONDS
O=""; for i in gemv histogram l2norm layernorm_fp32 logsumexp maxpool2d mean_var rmsnorm_fp16 rotary softmax_bf16_short softmax_long swiglu transpose_fp16 transpose_tiny_batched; do O="$O --only $i"; done
KLINEAGE_HOME=/tmp/home_ho2 timeout 280 python3 -m klineage heldout --backend cuda --db .gpu/skills.duckdb --skills all --order curriculum --jobs 8 $O --out $OUT/ho3/run > $OUT/ho3.log 2>&1; echo "rc=$? at $((SECONDS-t0)) s"
tail -40 $OUT/ho3.log
cd $OUT && tar czf ho3.tgz --exclude='*.cu.o' --exclude='*.so' --exclude='*.cubin' --exclude='*.o' ho3 && rm -rf ho3
