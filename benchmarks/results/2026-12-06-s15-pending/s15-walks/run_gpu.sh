#!/usr/bin/env bash
# s15-walks: lineage coverage of the eight re-walked public lineages (issue 23's second line).
# Each lineage's expert, naive and root (the emu walk's end state at branch 2af489a, copied into
# .devwork/s15-walks/lineages/<l>/root.cu; the authors' kernels with our host side, never committed)
# is built with the cuda gate's build, checked on the test shapes (two seeds) and timed at the
# bench shape beside torch. Honours LIMIT_S (default 90): timing stops LIMIT_S - 20 s in.
set -u
cd "$(dirname "$0")/../.."
LIMIT_S=${LIMIT_S:-90}
mkdir -p "$OUT/s15-walks"
python3 .devwork/s15-walks/lineage_time.py --out "$OUT/s15-walks" --deadline-s $((LIMIT_S - 20)) \
  --budget-s 0.6 > "$OUT/s15-walks/stdout.txt" 2>&1
echo "rc=$?"
cat "$OUT/s15-walks/lineage_time.md" 2>/dev/null || tail -30 "$OUT/s15-walks/stdout.txt"
