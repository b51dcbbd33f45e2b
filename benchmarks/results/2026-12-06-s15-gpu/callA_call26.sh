#!/usr/bin/env bash
# issue 26, twelfth-session call: in one device call, leave-one-out on cuda (the issue's 13
# workloads x curriculum, random seed 0, none; budget 10) beside `klineage heldout --backend cuda`
# (23 instances, curriculum), GPU work taking turns through the host-wide device lock.
set -u
cd "$(dirname "$0")/.."
export OUT=${OUT:-/tmp/out}
source benchmarks/gpu_env.sh
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
python3 -c "import torch; print('torch', torch.__version__)"
echo "main at $(cat .gpu/HEAD)"; nproc
t0=$SECONDS
W=reduce_sum,reduce_sum_rows,softmax,softmax_fp16,layernorm,layernorm_bf16,rmsnorm,transpose,transpose_batched,topk,sgemm,gemm_bf16,attention_fwd
cp .gpu/skills.duckdb /tmp/ho_skills.duckdb   # two processes cannot open one store
KLINEAGE_HOME=/tmp/home_loo KL_JOBS=${KL_LOO_JOBS:-8} KL_MODES=curriculum,random,none KL_WORKLOADS=${KL_W:-$W} \
  KL_MATERIALIZE_S=${KL_S:-520} OUT=$OUT/loo bash benchmarks/gpu_round.sh materialize > $OUT/loo_stdout.txt 2>&1 &
p1=$!
KL_DB=/tmp/ho_skills.duckdb KLINEAGE_HOME=/tmp/home_ho KL_JOBS=${KL_HO_JOBS:-4} KL_HELDOUT_MODES=curriculum KL_HELDOUT_S=${KL_S:-520} \
  OUT=$OUT/ho bash benchmarks/gpu_round.sh heldout > $OUT/ho_stdout.txt 2>&1 &
p2=$!
wait $p1; echo "loo done at $((SECONDS - t0)) s"
wait $p2; echo "heldout done at $((SECONDS - t0)) s"
cp /tmp/home_ho/resident-worker.log $OUT/ho/worker.log 2>/dev/null; grep -h retired /tmp/home_loo/resident-worker.log /tmp/home_ho/resident-worker.log > $OUT/retired.txt 2>/dev/null
python3 benchmarks/gate_stages.py $OUT/loo/materialize/runs.duckdb /tmp/home_loo/resident-worker.log > $OUT/loo_stages.txt 2>&1
ho_db=$(find $OUT/ho -name runs.duckdb | head -1); [ -z "$ho_db" ] && ho_db=/tmp/ho_skills.duckdb
[ -n "$ho_db" ] && python3 benchmarks/gate_stages.py "$ho_db" /tmp/home_ho/resident-worker.log > $OUT/ho_stages.txt 2>&1
cat /tmp/home_loo/resident-worker.log /tmp/home_ho/resident-worker.log 2>/dev/null | grep "more device memory\|retired\|others_mib=[1-9-]" > $OUT/worker_notes.txt
echo "retired: $(grep -c retired /tmp/home_loo/resident-worker.log /tmp/home_ho/resident-worker.log | tr '\n' ' ')"
(cd $OUT && tar czf /tmp/call26.tgz --exclude='*.cu.o' --exclude='*.so' --exclude='*.cubin' loo ho loo_stdout.txt ho_stdout.txt loo_stages.txt ho_stages.txt retired.txt worker_notes.txt)
rm -rf $OUT/loo $OUT/ho; cp /tmp/call26.tgz $OUT/
tail -45 $OUT/loo_stdout.txt; tail -30 $OUT/ho_stdout.txt; cat $OUT/loo_stages.txt; cat $OUT/ho_stages.txt 2>/dev/null | tail -25; grep -c others_mib $OUT/worker_notes.txt; grep -v others_mib $OUT/worker_notes.txt | tail -8
head -20 $OUT/retired.txt; ls -la $OUT; rm -f $OUT/worker_notes.txt
