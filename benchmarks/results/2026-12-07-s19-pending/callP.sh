#!/usr/bin/env bash
# nineteenth session's staged call for issue 26's agreement line (carry [".whl", ".gpu"], staged by
# benchmarks/results/2026-12-07-s19-pending/stage.sh; about 580 s, timeout_s 600):
#  (1) J5, the judge of CPU round 5's 14 kernels;
#  (2) further CPU rounds on this machine (emu, 720d648's operators, --measured J1 ... J5, 13 jobs,
#      every workload but attention_fwd: its emu run alone takes 270 s), each followed by a judge
#      of its new kernels, until a round makes none or KL_P_S runs low;
#  (3) call A's bests and the last round's bests timed in one process, and round_agreement.py.
# The seventeenth session's callH.sh did the same from round 3 (never run: the device time went
# elsewhere); rounds 3-5 ran off the device since (RESULTS, eighteenth and nineteenth sessions).
set -u
cd "$(dirname "$0")/.."
export OUT=${OUT:-/tmp/out}
source benchmarks/gpu_env.sh
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
t0=$SECONDS
P_S=${KL_P_S:-580}
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
judge $OUT/J5 70 --only "$(only_of .gpu/r5/candidates.json)" --extra .gpu/r5/candidates.json
# (2) $OUT/cpu: round 5 as it stands, each later round's workloads put in its place
RW=${KL_ROUND_W:-${W%,attention_fwd}}
# the emu backend needs a host C++ compiler: one gate first, and no rounds here when it fails
KLINEAGE_HOME=/tmp/home_emu timeout 180 python3 -m klineage gate expert_kernels/softmax/naive.cu \
  -w expert_kernels/softmax --backend emu > $OUT/emu_smoke.txt 2>&1 \
  || { echo "the emu backend does not run here (emu_smoke.txt): no rounds on the device"; RW=""; }
cp -r .gpu/r5 $OUT/cpu
M=".gpu/J1.json .gpu/J2.json .gpu/J3a.json .gpu/J3b.json .gpu/J4.json $OUT/J5/materialized_bench.json"
for i in 6 7 8 9; do
  [ -z "$RW" ] && break
  left=$((P_S - (SECONDS - t0)))
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
judge $OUT/pairs $((P_S - (SECONDS - t0) - 15)) --only $W "${runs[@]}"
echo "== agreement"
python3 benchmarks/round_agreement.py --loop benchmarks/results/2026-12-06-s15-gpu/callA_loo_bench.json \
  --cpu $OUT/cpu --judge $OUT/pairs/materialized_bench.json | tee $OUT/agreement.md | tail -6
cp $OUT/J5/materialized_bench.json $OUT/J5_bench.json
(cd $OUT && tar czf callP.tgz --exclude='*.cu.o' --exclude='*.so' --exclude='*.cubin' --exclude='*.o' \
  --exclude='runs.duckdb*' J* pairs cpu $(ls -d r[0-9] 2>/dev/null) && rm -rf J[0-9] pairs cpu r[0-9])
echo "done at $((SECONDS - t0)) s"
