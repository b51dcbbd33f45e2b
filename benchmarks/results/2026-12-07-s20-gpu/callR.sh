#!/usr/bin/env bash
# twentieth session, call R (carry [".whl", ".gpu"], timeout_s 600): issue 26's agreement with both
# sides on one device and one set of operators. (1) the GPU loop: leave-one-out over the 13 workloads
# x (curriculum, random seed 0, none), budget 10, --backend cuda, with the operators and store the
# CPU rounds used (.gpu/at720, .gpu/store720.duckdb), attention_fwd left out as in the CPU rounds 6-7
# (its loop alone takes 160-220 s; KL_W to change); (2) its bests beside the CPU rounds' converged
# bests (.gpu/cpu7: call P's rounds 5-7, judged by J1-J6) in one judge process; round_agreement.py.
set -u
cd "$(dirname "$0")/../../.."
export OUT=${OUT:-/tmp/out}
source benchmarks/gpu_env.sh
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
t0=$SECONDS
R_S=${KL_R_S:-470}
W=${KL_W:-reduce_sum,reduce_sum_rows,softmax,softmax_fp16,layernorm,layernorm_bf16,rmsnorm,transpose,transpose_batched,topk,sgemm,gemm_bf16}
KLINEAGE_HOME=/tmp/home_loo PYTHONPATH=.gpu/at720:$PYTHONPATH timeout ${KL_LOOP_S:-290} python3 \
  .gpu/at720/benchmarks/materialize_bench.py --backend cuda --db .gpu/store720.duckdb --modes curriculum,random,none \
  --budget 10 --workloads $W --jobs 8 --out $OUT/loop > $OUT/loop.log 2>&1
echo "loop rc=$? at $((SECONDS - t0)) s"; tail -22 $OUT/loop.log | grep -E "curriculum|random|none" | tail -4
runs=(); for m in curriculum random none; do
  runs+=(--run "loop_$m=$OUT/loop/{name}/$m/best.cu" --run "cpu_$m=.gpu/cpu7/{name}/$m/best.cu"); done
d=$((R_S - (SECONDS - t0) - 15))
mkdir -p $OUT/pairs
KLINEAGE_HOME=/tmp/home_j timeout $((d + 15)) python3 benchmarks/materialized_bench.py --suite corpus \
  --budget-s 0.2 --deadline-s "$d" --out $OUT/pairs --only $W "${runs[@]}" > $OUT/pairs/log.txt 2>&1
echo "pairs rc=$? at $((SECONDS - t0)) s: $(grep -cE '^[a-z_0-9]+: naive' $OUT/pairs/log.txt) workloads"
python3 benchmarks/round_agreement.py --loop $OUT/loop/bench.json --cpu .gpu/cpu7 \
  --judge $OUT/pairs/materialized_bench.json > $OUT/agreement.md; tail -5 $OUT/agreement.md
(cd $OUT && tar czf callR.tgz --exclude='*.cu.o' --exclude='*.so' --exclude='*.cubin' --exclude='*.o' \
  --exclude='runs.duckdb*' loop pairs loop.log && rm -rf loop pairs)
echo "done at $((SECONDS - t0)) s"
