#!/usr/bin/env bash
# s15-hopper (issue 25, item 3): the wgmma/TMA gemm_bf16 expert and its fallbacks on the GPU.
# Run from the repo root after `source benchmarks/gpu_env.sh`; honours $LIMIT_S (default 120);
# logs under $OUT/s15-hopper/. Prints a table last.
#   1. builds expert_kernels/gemm_bf16/variants/expert_wgmma.cu under -D variants and the mma.sync
#      expert (expert.cu), all at once (nvcc, the cuda gate's flags);
#   2. per variant, in its own process (20 s limit, so a hang costs only that): 6 shapes checked
#      against an fp32 torch reference (64^3, 192x320x128, 640x448x576, 2112x2240x320,
#      128x1024x2048, 4096^3), then timed at 4096^3 and 8192x1024x8192 beside cuBLAS
#      (torch.matmul), CUDA events, L2 flushed, median of 20;
#   3. the fastest correct wgmma variant (one file, its #defines first) through the cuda gate:
#      `python3 -m klineage gate ... --backend cuda` (test shapes, seeds, poison, guard zones).
# Time: a cuda gate takes ~20 s (RESULTS), a variant ~5 s (torch start-up, checks, timing), the
# builds ~15 s in parallel. With LIMIT_S >= 80 no variant starts after LIMIT_S - 40 s and the gate
# runs after; below 80 the gate is left out and variants may start until LIMIT_S - 12 s.
# Variants, in priority order:
#   wgmma        the committed default: 128x256 tiles, 4 stages, m64n256k16, persistent, cluster 1
#   wgmma_c2     clusters of 2 along M sharing B by TMA multicast (not checkable on the emulator)
#   wgmma_noreg  no setmaxnreg (154 registers, no spills): tells whether the reallocation is at fault
#   wgmma_swapB  B's descriptor offsets exchanged: right only if the default reads B wrong
#   wgmma_n128   two m64n128k16 per k16 instead of one m64n256k16
#   wgmma_bn128  128x128 tiles, 6 stages, no setmaxnreg
#   mma_sync     the current expert (expert.cu), the 0.45x reference
#   wgmma_tiles  one block per tile (not persistent)
set -u
cd "$(dirname "$0")/../.."
LIMIT_S=${LIMIT_S:-120}
OUT=${OUT:-/tmp/s15-hopper-out}
LOG="$OUT/s15-hopper"
mkdir -p "$LOG"
T0=$SECONDS
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader > "$LOG/device.txt" 2>&1
K=expert_kernels/gemm_bf16/variants/expert_wgmma.cu
GATED="$LOG/gated_wgmma.cu"
rm -f "$GATED"
if [ "$LIMIT_S" -ge 80 ]; then DEADLINE=$((LIMIT_S - 40)); else DEADLINE=$((LIMIT_S - 12)); fi
timeout $((DEADLINE + 24)) python3 benchmarks/gemm_variants_bench.py --out "$LOG/bench" \
  --child-limit-s 20 --deadline-s "$DEADLINE" --reps 20 --gate-file "$GATED" --gate-prefix wgmma \
  --variant "wgmma=$K" \
  --variant "wgmma_c2=$K:KL_CLUSTER=2" \
  --variant "wgmma_noreg=$K:KL_SETMAXNREG=0" \
  --variant "wgmma_swapB=$K:KL_B_SWAP_OFFSETS=1" \
  --variant "wgmma_n128=$K:KL_WGMMA_N=128" \
  --variant "wgmma_bn128=$K:KL_BN=128,KL_WGMMA_N=128,KL_STAGES=6" \
  --variant "mma_sync=expert_kernels/gemm_bf16/expert.cu" \
  --variant "wgmma_tiles=$K:KL_PERSISTENT=0" > "$LOG/bench.log" 2>&1
echo "bench rc=$? $((SECONDS - T0))s" >> "$LOG/rounds.txt"

left=$((LIMIT_S - (SECONDS - T0) - 3))
if [ -f "$GATED" ] && [ "$left" -gt 22 ]; then
  timeout "$left" python3 -m klineage gate "$GATED" -w expert_kernels/gemm_bf16 --backend cuda --no-cache \
    > "$LOG/gate.log" 2>&1
  echo "gate rc=$? $((SECONDS - T0))s ($(head -c 300 "$GATED" | grep '^#define' | tr '\n' ' '))" >> "$LOG/rounds.txt"
else
  echo "gate not run: no correct wgmma variant, or ${left}s left" >> "$LOG/rounds.txt"
fi

echo "== s15-hopper: $(cat "$LOG/device.txt")"
grep -E "^(built|fastest|[a-zA-Z0-9_]+: )" "$LOG/bench.log" | cut -c1-300 | head -12
cat "$LOG/rounds.txt"
grep -E "ACCEPTED|REJECTED" "$LOG/gate.log" 2>/dev/null | cut -c1-400
cat "$LOG/bench/table.md" 2>/dev/null
