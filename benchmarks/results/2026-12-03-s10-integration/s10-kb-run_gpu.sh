#!/usr/bin/env bash
# s10-kb (issue 29): the cuda gate beside KernelBench's evaluator (423217d) on public level-1
# solutions (KernelBenchLeaderboard 170ca79). Finishes within KB_SECONDS (default 420) of its start;
# pairs are taken in pairs/pairs.json's order (the 33 of the every-6th set first, then 32 more).
# Out: $OUT/s10-kb/kb.tgz (logs, per-pair rows) and $OUT/s10-kb/agreement.txt (the table).
cd "$(dirname "$0")"
T0=$(date +%s)
# a site of its own (the carried wheels, and the klineage mapping of THIS tree), so that a script of
# another helper running at the same time keeps its own mapping in /tmp/site
export KLINEAGE_SITE=/tmp/site-s10-kb
[ -e .whl ] || ln -s ../../.whl .whl
source benchmarks/gpu_env.sh
export KLINEAGE_HOME=/tmp/klh-s10-kb TORCH_CUDA_ARCH_LIST=9.0
mkdir -p "$OUT/s10-kb"
RUN=/tmp/s10-kb-run; rm -rf "$RUN"; mkdir -p "$RUN"
{ nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; python3 -c 'import torch; print(torch.__version__)';
  which ninja nvcc; echo "setup $(( $(date +%s) - T0 )) s"; } > "$RUN/env.txt" 2>&1
STOP=$(( ${KB_SECONDS:-420} - 20 - ($(date +%s) - T0) ))  # 20 s left for the tar and the table
# a session of its own, so that what it started and left running at --stop (builds, an evaluation)
# is ended with it and does not run on beside the next helper's script
setsid timeout $(( STOP + 10 )) python3 benchmarks/kernelbench_agreement.py --pairs pairs/pairs.json \
  --kernelbench-src kbsrc --out "$RUN" --jobs 16 --deadline $(( STOP * 3 / 5 )) --stop "$STOP" > "$RUN/kb.log" 2>&1 &
PG=$!
wait $PG
echo "rc=$? wall $(( $(date +%s) - T0 )) s" >> "$RUN/kb.log"
kill -TERM -- -"$PG" 2>/dev/null
cp "$RUN/env.txt" "$OUT/s10-kb/agreement.txt"
sed -n '/^| solution/,$p' "$RUN/kb.log" >> "$OUT/s10-kb/agreement.txt"
[ -s "$RUN/agreement.md" ] || { grep '^\[' "$RUN/kb.log" >> "$OUT/s10-kb/agreement.txt"; }
tar -czf "$OUT/s10-kb/kb.tgz" -C "$RUN" --exclude='*.ext' --exclude='*/build' . 2>/dev/null
tail -75 "$OUT/s10-kb/agreement.txt"
