#!/usr/bin/env bash
# s13-lineages (issue 24): the leave-one-out best kernels of class_weight_share (now with
# privatized_atomics taken from group_mean's lineage), group_mean and topk, each beside its naive
# and torch in one process; then the new expert group_mean against torch (corpus standard).
# The kernels in kernels/ are the emu round's best.cu (materialize_bench.py --backend emu,
# curriculum, budget 20, shipped store + a scratch store with group_mean mined).
set -u
OUTD="$OUT/s13-lineages"; mkdir -p "$OUTD"
LIMIT_S=${LIMIT_S:-100}
K=.devwork/s13-lineages/kernels
t0=$SECONDS
timeout $((LIMIT_S * 55 / 100)) python3 -m klineage timings bench --suite corpus \
  --only class_weight_share,group_mean,topk --run "loo=$K/{name}.cu" > "$OUTD/loo.txt" 2>&1
echo "loo rc=$? $((SECONDS - t0)) s" >> "$OUTD/summary.txt"
t1=$SECONDS
left=$((LIMIT_S - (SECONDS - t0) - 5)); [ "$left" -lt 20 ] && left=20
timeout "$left" python3 benchmarks/corpus_bench.py --check --only group_mean,class_weight_share \
  --out "$OUTD/corpus" > "$OUTD/corpus.txt" 2>&1
echo "corpus rc=$? $((SECONDS - t1)) s" >> "$OUTD/summary.txt"
cat "$OUTD/summary.txt"
echo "== leave-one-out (x naive, x torch)"; tail -15 "$OUTD/loo.txt"
echo "== group_mean expert vs torch"; tail -12 "$OUTD/corpus.txt"
