#!/bin/bash
# s10-refactor (issue 28): `klineage timings bench` (this branch) against the old
# benchmarks/materialized_bench.py (main's tree, two folders up) on the same kernels: the naive and
# expert kernels of softmax and transpose, torch beside them, in two processes one after the other.
# Budget: 60 s. Writes $OUT/s10-refactor/{s10-refactor.tgz,s10-refactor.txt}; prints the table last.
HERE="$(cd "$(dirname "$0")" && pwd)"
MAIN="$(cd "$HERE/../.." && pwd)"
cd "$HERE"
export KLINEAGE_SITE=${KLINEAGE_SITE:-/tmp/site}
source benchmarks/gpu_env.sh
O="$OUT/s10-refactor"
W="$(mktemp -d)"
mkdir -p "$O" "$W/new" "$W/old"
ARGS=(--suite corpus --only softmax,transpose --run "expert=$HERE/expert_kernels/{name}/expert.cu" --budget-s 0.2 --deadline-s 20)
t0=$(date +%s)
# the command, from this branch
timeout 27 python3 -m klineage timings bench "${ARGS[@]}" --out "$W/new" > "$W/new/stdout.txt" 2>&1
echo "new rc $?" >> "$W/rc.txt"
# the old script, from main: its own klineage first on the path, its gates/materialize mapped to main too
mkdir -p /tmp/site_s10_old
if [ -f "$KLINEAGE_SITE/_klineage_repo.py" ]; then
  sed "s|$HERE|$MAIN|g" "$KLINEAGE_SITE/_klineage_repo.py" > /tmp/site_s10_old/_klineage_repo.py
fi
(cd "$MAIN" && PYTHONPATH="/tmp/site_s10_old:$KLINEAGE_SITE:$MAIN" python3 -c \
  'import klineage, klineage.gates as g; print("old klineage", klineage.__file__, g.__file__)' >> "$W/rc.txt" 2>&1)
(cd "$MAIN" && PYTHONPATH="/tmp/site_s10_old:$KLINEAGE_SITE:$MAIN" timeout 27 python3 benchmarks/materialized_bench.py \
  "${ARGS[@]}" --out "$W/old" > "$W/old/stdout.txt" 2>&1; echo "old rc $?" >> "$W/rc.txt")
echo "wall $(( $(date +%s) - t0 )) s" >> "$W/rc.txt"
python3 - "$W" > "$W/compare.txt" 2>&1 <<'PY'
import json, sys
from pathlib import Path
w = Path(sys.argv[1])
def doc(side):
    p = w / side / "materialized_bench.json"
    return json.loads(p.read_text()) if p.is_file() else None
new, old = doc("new"), doc("old")
print("klineage:", "from", __import__("klineage").__file__)
if not new or not old:
    print("missing JSON:", "new" if not new else "", "old" if not old else "")
    sys.exit(0)
rows = lambda d: {r["name"]: r for r in d["rows"]}
rn, ro = rows(new), rows(old)
print(f"device {new['device']} | torch {new['torch']} | same keys of the document: {sorted(new) == sorted(old)}")
print("| workload | kernels (new/old) | same digests | checks new | checks old | naive ms new/old | expert ms new/old | torch ms new/old | expert x naive new/old |")
print("|---|---|---|---|---|---|---|---|---|")
for n in sorted(set(rn) | set(ro)):
    a, b = rn.get(n, {}), ro.get(n, {})
    ka, kb = a.get("kernels", {}), b.get("kernels", {})
    ms = lambda r, lb: r.get(lb, {}).get("ms")
    f = lambda v: f"{v:.4f}" if isinstance(v, float) else "-"
    x = lambda r: r.get("expert", {}).get("x_naive")
    print(f"| {n} | {len(ka)}/{len(kb)} | {set(ka) == set(kb)} | {','.join(k.get('check','') for k in ka.values())} | "
          f"{','.join(k.get('check','') for k in kb.values())} | {f(ms(a,'naive'))}/{f(ms(b,'naive'))} | "
          f"{f(ms(a,'expert'))}/{f(ms(b,'expert'))} | {f(a.get('torch_ms'))}/{f(b.get('torch_ms'))} | {f(x(a))}/{f(x(b))} |")
PY
{
  echo "# s10-refactor: klineage timings bench (new) vs benchmarks/materialized_bench.py from main (old), same kernels"
  cat "$W/rc.txt"
  echo; echo "## new: python3 -m klineage timings bench ${ARGS[*]}"; tail -n 12 "$W/new/stdout.txt"
  echo; echo "## old: python3 benchmarks/materialized_bench.py (main) ${ARGS[*]}"; tail -n 12 "$W/old/stdout.txt"
  echo; echo "## compared (JSON of both)"; cat "$W/compare.txt"
} > "$O/s10-refactor.txt"
tar -czf "$O/s10-refactor.tgz" -C "$W" .
# leave the import mapping as main's gpu_env.sh left it (later scripts of the call may rely on it)
[ -f /tmp/site_s10_old/_klineage_repo.py ] && cp /tmp/site_s10_old/_klineage_repo.py "$KLINEAGE_SITE/_klineage_repo.py"
cat "$O/s10-refactor.txt"
