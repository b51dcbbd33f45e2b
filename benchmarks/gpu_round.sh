#!/usr/bin/env bash
# One device call, several named stages: each writes its log under $OUT/<stage>/ and a one-line
# status to $OUT/rounds.txt; the tables are printed last. Device time is scarce (30 minutes a
# session, a few minutes of machine start per call), so a call runs every stage that is ready.
#
#   bash benchmarks/gpu_setup.sh                     # here, once: wheels into .whl/
#   # device, carry [".whl", ".gpu"]:
#   bash benchmarks/gpu_round.sh kb coverage scale   # stages in the order given
#
# Stages (timeouts in seconds through KL_<STAGE>_S):
#   kb           KernelBench round trip: import, cuda gate, export ModelNew, KernelBench-style eval
#   compute      the compute-bound experts re-checked and timed (issue 10)
#   coverage     lineage roots (benchmarks/lineage_roots/) timed beside expert/naive/torch (issue 7);
#                KL_COVERAGE_ONLY=a,b limits the workloads
#   scale        emu mining, local executor, 1 vs 14 workers, bounded walk (issue 14)
#   scale_cuda   cuda gating of tests/data/mining through the local executor, 1 worker (issue 14)
#   states       every lineage state of .gpu/states/index.json (`klineage timings export --out .gpu/states`,
#                here) checked and timed beside naive and torch; `klineage timings import
#                $OUT/states/materialized_bench.json` back here turns the times into skill effects
#                and lineage coverage (issue 7)
#   mine         the corpus mined on emu with KL_MINE_WORKERS (14) walks at once into a fresh store,
#                exported to $OUT/mine/export (cards + JSONL); later stages of the call use that store
#   materialize  leave-one-out materializer on cuda, KL_MODES (curriculum,random,none), KL_JOBS runs at once,
#                KL_BUDGET gates a run (10), KL_SEEDS random orders (seeds 0..N-1; default seed 0 only)
#   judge        the materializer's judge on the GPU, in one process: every correct candidate of a CPU
#                round (KL_JUDGE_RUN, default .gpu/r1: `materialize_bench.py --out` there, carried) checked
#                and timed at the bench shape; with KL_JUDGE_CURVE=1 its budget curve too. The next
#                round reads $OUT/judge/materialized_bench.json with --measured (issue 8); KL_JUDGE_ONLY=a,b
#                limits the workloads, KL_JUDGE_KS=10 the curve's budget points
#   heldout      held-out instances on cuda, one run per mode of KL_HELDOUT_MODES (curriculum,none), KL_JOBS at once
#   cli          `python3 -m klineage` there: a cuda gate, then its cached answer timed (KL_CLI_KERNEL), import times
#   gatebench    benchmarks/gate_bench.py: the resident worker against a child per candidate (issue 26):
#                adversarial rows, faults interleaved with honest kernels, candidates per minute;
#                KL_GATE_LIMIT, KL_GATE_CHILD candidates, KL_GATE_DEADLINE s, KL_JOBS at once;
#                KL_GATE_PHASES=throughput,slow picks phases (slow: the slow naive kernels' timing rule);
#                KL_GATE_WINDOW=S: each workload's first candidate gated first, then an S-second warm window
# `.gpu/skills.duckdb` (ignored) is the skill store the materializer and the held-out check use:
# the shipped skills rebuilt here from skills_db/skills.jsonl (`klineage.export.shipped_store`), as
# `klineage materialize` does in a fresh clone.
set -u
cd "$(dirname "$0")/.."
source benchmarks/gpu_env.sh
OUT=${OUT:-/tmp/gpu_round}
mkdir -p "$OUT"
DB=${KL_DB:-.gpu/skills.duckdb}

stage() {  # name timeout command...
  local name=$1 limit=$2
  shift 2
  mkdir -p "$OUT/$name"
  local t0=$SECONDS
  timeout "$limit" "$@" > "$OUT/$name/$name.log" 2>&1
  local rc=$?
  echo "$name rc=$rc $((SECONDS - t0))s" | tee -a "$OUT/rounds.txt"
}

for s in "$@"; do
  case $s in
    kb) stage kb "${KL_KB_S:-150}" python3 benchmarks/kernelbench_gpu_check.py --out "$OUT/kb" ;;
    compute) stage compute "${KL_COMPUTE_S:-240}" python3 benchmarks/corpus_bench.py --check \
      --only sgemm,gemm_bf16,attention_fwd --budget-s 2 --naive-budget-s 1 --skip-naive --out "$OUT/compute" ;;
    coverage)
      only=${KL_COVERAGE_ONLY:-$(ls benchmarks/lineage_roots | paste -sd, -)}
      # shellcheck disable=SC2046
      stage coverage "${KL_COVERAGE_S:-300}" python3 benchmarks/corpus_bench.py --check --only "$only" \
        --budget-s 2 --naive-budget-s 2 --out "$OUT/coverage" $(python3 benchmarks/lineage_bench.py variants)
      python3 benchmarks/lineage_bench.py coverage "$OUT/coverage/corpus_bench.json" > "$OUT/coverage/coverage.md" 2>&1 ;;
    scale) stage scale "${KL_SCALE_S:-420}" python3 benchmarks/scale_bench.py expert_kernels --workers 1,14 --no-ray \
      --max-steps "${KL_SCALE_STEPS:-3}" --json "$OUT/scale/scale.json" ;;
    scale_cuda) stage scale_cuda "${KL_SCALE_CUDA_S:-120}" python3 benchmarks/scale_bench.py tests/data/mining \
      --backend cuda --workers 1 --no-ray --json "$OUT/scale_cuda/scale.json" ;;
    states) stage states "${KL_STATES_S:-560}" python3 -m klineage timings bench --suite corpus \
      --extra .gpu/states/index.json ${KL_STATES_ONLY:+--only "$KL_STATES_ONLY"} --budget-s "${KL_STATES_BUDGET:-0.2}" \
      --deadline-s "${KL_STATES_DEADLINE:-500}" --out "$OUT/states" ;;
    mine)
      DB=.gpu/mined.duckdb
      rm -f "$DB" "$DB.wal"
      stage mine "${KL_MINE_S:-420}" python3 -m klineage mine expert_kernels --db "$DB" --backend emu \
        --workers "${KL_MINE_WORKERS:-14}"
      python3 -m klineage skills export --db "$DB" --out "$OUT/mine/export" >> "$OUT/mine/mine.log" 2>&1
      cp "$DB" "$OUT/mine/mined.duckdb" ;;
    materialize) stage materialize "${KL_MATERIALIZE_S:-420}" python3 benchmarks/materialize_bench.py --db "$DB" \
      --backend cuda --modes "${KL_MODES:-curriculum,random,none}" ${KL_WORKLOADS:+--workloads "$KL_WORKLOADS"} \
      ${KL_BUDGET:+--budget "$KL_BUDGET"} ${KL_SEEDS:+--seeds "$KL_SEEDS"} --jobs "${KL_JOBS:-8}" --out "$OUT/materialize"
      # the worker's per-candidate phases (load, correctness, profile): where the loop's time goes
      cp "$KLINEAGE_HOME/resident-worker.log" "$OUT/materialize/worker.log" 2>/dev/null ;;
    judge)
      run=${KL_JUDGE_RUN:-.gpu/r1}
      stage judge "${KL_JUDGE_S:-560}" python3 -m klineage timings bench --suite corpus \
        --extra "$run/candidates.json" ${KL_JUDGE_CURVE:+--curve "$run/curve.json"} ${KL_JUDGE_ONLY:+--only "$KL_JUDGE_ONLY"} ${KL_JUDGE_KS:+--ks "$KL_JUDGE_KS"} \
        --budget-s "${KL_JUDGE_BUDGET:-0.3}" --deadline-s "${KL_JUDGE_DEADLINE:-500}" --out "$OUT/judge" ;;
    heldout)
      for mode in ${KL_HELDOUT_MODES:-curriculum none}; do
        skills=all order=curriculum
        [ "$mode" = none ] && skills=none
        [ "$mode" = random ] && order=random
        stage "heldout_$mode" "${KL_HELDOUT_S:-300}" python3 -m klineage heldout --backend cuda --db "$DB" \
          --skills "$skills" --order "$order" --jobs "${KL_JOBS:-8}" --out "$OUT/heldout_$mode/run"
      done ;;
    cli)
      k=${KL_CLI_KERNEL:-expert_kernels/softmax/expert.cu}
      stage cli "${KL_CLI_S:-180}" python3 -c "
import statistics, subprocess, sys, time
cmd = [sys.executable, '-m', 'klineage', 'gate', '$k', '--backend', 'cuda']
first = subprocess.run(cmd, capture_output=True, text=True)
print(first.stdout + first.stderr)
walls = []
for _ in range(5):
    t0 = time.perf_counter()
    r = subprocess.run(cmd, capture_output=True, text=True)
    walls.append(time.perf_counter() - t0)
print(r.stdout.strip().splitlines()[0])
print('cached answer s:', [round(w, 3) for w in walls], 'median', round(statistics.median(walls), 3))
"
      python3 -X importtime -m klineage gate "$k" --backend cuda 2> "$OUT/cli/importtime.txt" > /dev/null ;;
    gatebench)
      stage gatebench "${KL_GATEBENCH_S:-480}" python3 benchmarks/gate_bench.py --out "$OUT/gatebench" \
        --limit "${KL_GATE_LIMIT:-150}" --child-limit "${KL_GATE_CHILD:-8}" --jobs "${KL_JOBS:-8}" \
        --deadline-s "${KL_GATE_DEADLINE:-400}" ${KL_GATE_PHASES:+--phases "$KL_GATE_PHASES"} \
        ${KL_GATE_WINDOW:+--prewarm --window-s "$KL_GATE_WINDOW"}
      cp "$KLINEAGE_HOME/resident-worker.log" "$OUT/gatebench/worker.log" 2>/dev/null ;;
    *) echo "unknown stage $s" | tee -a "$OUT/rounds.txt" ;;
  esac
done

echo "== rounds"; cat "$OUT/rounds.txt"
for s in "$@"; do
  case $s in
    kb) tail -6 "$OUT/kb/kb.log" ;;
    compute) grep -E '^\|' "$OUT/compute/compute.log" | tail -24 ;;
    coverage) cat "$OUT/coverage/coverage.md" ;;
    scale) tail -8 "$OUT/scale/scale.log" ;;
    scale_cuda) tail -8 "$OUT/scale_cuda/scale_cuda.log" ;;
    states) grep -E '^[a-z_0-9]+: naive|^wall|kernels not timed|not ok' "$OUT/states/states.log" ;;
    mine) tail -22 "$OUT/mine/mine.log" ;;
    materialize) tail -30 "$OUT/materialize/materialize.log" ;;
    judge) grep -E '^[a-z_0-9]+: naive|^wall|kernels not timed|not ok|^\| *(k|[0-9]+) ' "$OUT/judge/judge.log" | tail -60 ;;
    heldout) for m in ${KL_HELDOUT_MODES:-curriculum none}; do tail -34 "$OUT/heldout_$m/heldout_$m.log"; done ;;
    cli) tail -4 "$OUT/cli/cli.log" ;;
    gatebench) tail -16 "$OUT/gatebench/gatebench.log" ;;
  esac
done
