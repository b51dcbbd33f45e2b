#!/usr/bin/env bash
# s17-exp (issue 25: where the compute-bound leave-one-out kernels lose their time). The kernels
# are the seventeenth session's leave-one-out bests (H100: sgemm 4.67 ms = 0.575x cuBLAS,
# attention_fwd 4.01 ms = 0.107x SDPA), each beside a hand edit that no operator makes:
#   sgemm_loo_vec: the A and B tile loads as 16-byte global loads when the tile is in bounds
#     (163 registers, one block an SM); sgemm_loo_vec_lb: the same under __launch_bounds__(256, 2)
#     (128 registers, 28-byte spill);
#   attn_loo_affine: the flash forward's index lambdas (row pointers of K and V, the score
#     transform) written affinely with the block's (batch, head) computed once, instead of the
#     naive kernel's 64-bit index arithmetic per key and tile.
# A large gain says which forward step to write next (vectorized tile loads in gemm_tiling's
# forward; an affine fast path in flash_fusion's). Every kernel is emu-accepted (`klineage gate
# ... --backend emu`). One process per workload: checked on the test shapes, timed at the bench
# shape beside naive and the vendor call. Run from the repo root; out: $OUT/s17-exp/.
set -u
B=s17-exp
H=.devwork/$B
O="$OUT/$B"
export KLINEAGE_HOME=/tmp/klh-$B
mkdir -p "$O"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
DL=$(( ${LIMIT_S:-60} / 2 - 5 ))
python3 -m klineage timings bench --workload expert_kernels/sgemm --kernel expert=expert_kernels/sgemm/expert.cu \
  --kernel loo=$H/sgemm_loo.cu --kernel loo_vec=$H/sgemm_loo_vec.cu --kernel loo_vec_lb=$H/sgemm_loo_vec_lb.cu --kernel loo_tp=$H/sgemm_loo_tp.cu \
  --budget-s 0.5 --deadline-s $DL --out "$O/sgemm" > "$O/sgemm.log" 2>&1; echo "sgemm rc=$?"
python3 -m klineage timings bench --workload expert_kernels/attention_fwd --kernel expert=expert_kernels/attention_fwd/expert.cu \
  --kernel loo=$H/attn_loo.cu --kernel loo_affine=$H/attn_loo_affine.cu --kernel loo_ruleA=$H/attn_loo_ruleA.cu --kernel loo_emu=$H/attn_loo_emu.cu \
  --budget-s 0.5 --deadline-s $DL --out "$O/attention" > "$O/attention.log" 2>&1; echo "attention rc=$?"
grep -hE "^[a-z_0-9]+: naive|geomean" "$O/sgemm.log" "$O/attention.log"
