#!/usr/bin/env bash
# seventeenth session's pending call (issue 26's agreement, issue 24's last three kernels, issue
# 23's corpus coverage), staged by benchmarks/results/2026-12-07-s17-pending/stage.sh:
#  (1) side by side until KL_H1_S (170 s): the judge times of the CPU round r2's 102 new kernels
#      (J2); the shipped store's untimed lineage roots (corpus coverage); the emu round's sgemm
#      kernels again (three were never reached);
#  (2) further CPU rounds on this machine (emu, 720d648's operators, --measured J1 J2 ...; all
#      workloads but attention_fwd unless KL_ROUND_W says), each followed by a judge of its new
#      kernels, until a round makes none or KL_H_S runs low;
#  (3) the loop's bests (call A) and the last round's bests timed in one process, and
#      round_agreement.py on them.
set -u
cd "$(dirname "$0")/.."
export OUT=${OUT:-/tmp/out}
source benchmarks/gpu_env.sh
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; echo "main at $(cat .gpu/HEAD)"
t0=$SECONDS
H_S=${KL_H_S:-580}
H1=${KL_H1_S:-170}
W=reduce_sum,reduce_sum_rows,softmax,softmax_fp16,layernorm,layernorm_bf16,rmsnorm,transpose,transpose_batched,topk,sgemm,gemm_bf16,attention_fwd
judge() {  # out-folder deadline-s args...: one materialized_bench.py process
  local o=$1 d=$2; shift 2; mkdir -p "$o"
  KLINEAGE_HOME=/tmp/home_j timeout $((d + 20)) python3 benchmarks/materialized_bench.py --suite corpus \
    --budget-s 0.2 --deadline-s "$d" --out "$o" "$@" > "$o/log.txt" 2>&1
  echo "judge $(basename "$o") rc=$? at $((SECONDS - t0)) s: $(grep -cE '^[a-z_0-9]+: naive' "$o/log.txt") workloads"
}
count() { python3 -c "import json,sys; print(sum(len(v) for v in json.load(open(sys.argv[1]))['files'].values()))" "$1"; }
only_of() { python3 -c "import json,sys; print(','.join(w for w, v in json.load(open(sys.argv[1]))['files'].items() if v))" "$1"; }
# (1)
mkdir -p $OUT/states
judge $OUT/J2 $((H1 - 20)) --only $W --extra .gpu/r2/candidates.json &
judge $OUT/jsg $((H1 - 20)) --only sgemm --extra .gpu/r1/candidates.json &
KLINEAGE_HOME=/tmp/home_s timeout $((H1 + 10)) python3 -m klineage timings bench --suite corpus \
  --extra .gpu/states/roots.json --budget-s 0.2 --deadline-s $((H1 - 20)) --out $OUT/states > $OUT/states/log.txt 2>&1 &
wait; echo "roots at $((SECONDS - t0)) s: $(grep -cE '^[a-z_0-9]+: naive' $OUT/states/log.txt) workloads"
# (2) rounds over KL_ROUND_W (default: all but attention_fwd, whose emu run alone took 270 s with a
# warm cache here: its rounds run off the device); $OUT/cpu is the CPU round as it stands: r2, with
# each later round's workloads put in its place
RW=${KL_ROUND_W:-${W%,attention_fwd}}
cp -r .gpu/r2 $OUT/cpu
M=".gpu/J1.json $OUT/J2/materialized_bench.json"
for i in 3 4 5; do
  left=$((H_S - (SECONDS - t0)))
  [ $left -lt 330 ] && { echo "round $i: not started ($left s left; the pairs' judge needs about 170)"; break; }
  # shellcheck disable=SC2086
  KLINEAGE_HOME=/tmp/home_emu PYTHONPATH=.gpu/at720:$PYTHONPATH timeout $((left - 250)) python3 \
    .gpu/at720/benchmarks/materialize_bench.py --backend emu --db .gpu/store720.duckdb --modes curriculum,random,none \
    --budget 10 --workloads $RW --jobs 13 --measured $M --out $OUT/r$i > $OUT/r$i.log 2>&1
  rc=$?; [ $rc = 0 ] && [ -f $OUT/r$i/candidates.json ] || { echo "round $i rc=$rc at $((SECONDS - t0)) s"; tail -3 $OUT/r$i.log; break; }
  python3 - "$OUT/cpu" "$OUT/r$i" <<'PY'
import json, shutil, sys
from pathlib import Path
cur, new = map(Path, sys.argv[1:])
rows = json.loads((new / "bench.json").read_text())
ws = {r["workload"] for r in rows}
keep = [r for r in json.loads((cur / "bench.json").read_text()) if r["workload"] not in ws]
for w in ws:
    shutil.rmtree(cur / w, ignore_errors=True)
    shutil.copytree(new / w, cur / w)
(cur / "bench.json").write_text(json.dumps(keep + rows, indent=1))
PY
  n=$(count $OUT/r$i/candidates.json)
  echo "round $i at $((SECONDS - t0)) s: $n kernels without a judge time"
  [ "$n" = 0 ] && { echo "converged: round $i made no new kernel ($RW)"; break; }
  judge $OUT/J$i 60 --only "$(only_of $OUT/r$i/candidates.json)" --extra $OUT/r$i/candidates.json
  M="$M $OUT/J$i/materialized_bench.json"
done
# (3)
runs=(); for m in curriculum random none; do
  runs+=(--run "loop_$m=.gpu/a_best/$m/{name}/best.cu" --run "cpu_$m=$OUT/cpu/{name}/$m/best.cu"); done
judge $OUT/pairs $((H_S - (SECONDS - t0) - 15)) --only $W "${runs[@]}"
echo "== agreement"
python3 benchmarks/round_agreement.py --loop benchmarks/results/2026-12-06-s15-gpu/callA_loo_bench.json \
  --cpu $OUT/cpu --judge $OUT/pairs/materialized_bench.json | tee $OUT/agreement.md | tail -6
(cd $OUT && tar czf callH.tgz --exclude='*.cu.o' --exclude='*.so' --exclude='*.cubin' --exclude='*.o' \
  --exclude='runs.duckdb*' J* jsg states pairs cpu $(ls -d r[0-9] 2>/dev/null) && rm -rf J* jsg states pairs cpu r[0-9])
echo "done at $((SECONDS - t0)) s"
