#!/usr/bin/env bash
# issue 26 diagnosis: where a gate's time goes in the materializer's loop on cuda (stages_s per gate)
set -u
cd "$(dirname "$0")/.."
export OUT=${OUT:-/tmp/out}
source benchmarks/gpu_env.sh
export KLINEAGE_HOME=/tmp/home_diag
nproc; uptime
timeout -k 5 ${KL_S:-150} python3 -c "
import runpy, sys, threading, time
from klineage.gates import resident
def report():
    while True:
        time.sleep(20); print('resident workers:', resident.STATS, flush=True)
threading.Thread(target=report, daemon=True).start()
sys.argv = ['materialize_bench.py', '--db', '.gpu/skills.duckdb', '--backend', 'cuda', '--modes', 'curriculum', '--jobs', '${KL_JOBS:-14}', '--out', '$OUT/diag']
runpy.run_path('benchmarks/materialize_bench.py', run_name='__main__')
" > $OUT/diag.log 2>&1
echo "rc=$?"; uptime
python3 .gpu/stages.py $OUT/diag/runs.duckdb | tee $OUT/stages.txt
(cd $OUT && tar czf diag.tgz diag.log diag/runs.duckdb diag/rows.jsonl 2>/dev/null); rm -rf $OUT/diag
grep "resident workers" $OUT/diag.log | tail -1
tail -20 $OUT/diag.log | cut -c1-300
