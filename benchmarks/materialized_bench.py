"""Materialized kernels on the GPU, one process: for every workload, the naive kernel and the best
kernel of each materializer run (curriculum, random order, no skills, ...) are built in parallel,
checked with the correctness protocol on the `test` shapes (two seeds), and timed at the bench
shape beside the workload's vendor call (torch), with the `cuda` gate's timing. Identical sources
are timed once. The table gives each run's speedup over naive and over torch, and the geometric
means per run.

The runs come from materializer output folders made anywhere (on the CPU emulator too):

    klineage heldout --backend emu --out R/curriculum ...             # here
    python3 benchmarks/materialized_bench.py --suite heldout \\
        --run curriculum=R/curriculum/{name}/best.cu --run none=R/none/{name}/best.cu --out "$OUT"

`{name}` is the instance (heldout/) or workload (expert_kernels/) folder name. A run without a
file for a workload counts as "no kernel" (not as naive). Exit 1 when a produced kernel fails its
check.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import sys
import tempfile
import time
import traceback
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))
SUITES = {"heldout": ROOT / "heldout", "corpus": ROOT / "expert_kernels"}


def geomean(xs: list[float]) -> float | None:
    xs = [x for x in xs if x and x > 0]
    return math.exp(sum(map(math.log, xs)) / len(xs)) if xs else None


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--suite", choices=sorted(SUITES), default="heldout")
    p.add_argument("--only", default="", help="comma-separated workloads (default: every folder with naive.cu)")
    p.add_argument("--run", action="append", default=[], metavar="LABEL=PATTERN",
                   help="a materializer run: LABEL and a path pattern with {name}")
    p.add_argument("--budget-s", type=float, default=1.0, help="timing budget per kernel / torch call")
    p.add_argument("--out", default="", help="folder for materialized_bench.log and .json")
    p.add_argument("--dry-run", action="store_true", help="list the distinct kernels per workload and stop")
    args = p.parse_args(argv)
    runs = [tuple(r.split("=", 1)) for r in args.run]
    if not runs or any(len(r) != 2 or "{name}" not in r[1] for r in runs):
        print("--run LABEL=PATTERN with {name} in the pattern, at least once", file=sys.stderr)
        return 2
    root = SUITES[args.suite]
    names = sorted(d.name for d in root.iterdir() if (d / "naive.cu").is_file() and (d / "workload.py").is_file())
    if args.only:
        names = [n for n in names if n in args.only.split(",")]
    out = Path(args.out) if args.out else None
    if out:
        out.mkdir(parents=True, exist_ok=True)
    sink = open(out / "materialized_bench.log", "w") if out else None  # noqa: SIM115

    # one build per distinct source: label -> digest per workload
    sources: dict[tuple[str, str], Path] = {}
    digest: dict[tuple[str, str], str] = {}
    for n in names:
        for label, pattern in [("naive", str(root / "{name}" / "naive.cu")), *runs]:
            path = Path(pattern.format(name=n))
            if path.is_file():
                h = hashlib.sha256(path.read_bytes()).hexdigest()[:16]
                digest[(n, label)] = h
                sources.setdefault((n, h), path)
    if args.dry_run:
        for n in names:
            labels = {lb: digest.get((n, lb), "-") for lb in ["naive", *(r[0] for r in runs)]}
            print(n, len({h for (m, h) in sources if m == n}), labels)
        return 0
    import corpus_bench as cb
    import torch

    from klineage import load_workload
    from klineage.gates.cuda.runner import CudaRunner
    from klineage.gates.cuda.timing import Bench, timed
    from klineage.gates.protocol import check_workload

    t0 = time.perf_counter()
    built = cb.build_all([(n, h, path) for (n, h), path in sources.items()],
                         Path(tempfile.mkdtemp(prefix="materialized_bench_")))
    cb.log(f"built {len(sources)} distinct kernels of {len(names)} workloads in {time.perf_counter() - t0:.1f} s", sink)
    device = torch.device("cuda", torch.cuda.current_device())
    dev = torch.cuda.get_device_name(device)
    cb.log(f"device {dev}; torch {torch.__version__}", sink)
    rows: list[dict[str, Any]] = []
    for n in names:
        row: dict[str, Any] = {"name": n, "kernels": {}}
        rows.append(row)
        try:
            wl = load_workload(root / n)
            bindings = wl.shape_set("bench")[0]
            row["bench"] = bindings
            bench = Bench(wl, bindings, device)
            stream = torch.cuda.current_stream(device)
            for (name, h) in [k for k in sources if k[0] == n]:
                b = built[(name, h)]
                k: dict[str, Any] = {}
                row["kernels"][h] = k
                if not b.ok:
                    k["check"] = f"build failed: {b.message[:300]}"
                    continue
                runner = CudaRunner(b.library, wl, device)
                v = check_workload(wl, runner, "test", seeds=(0, 1))
                k["check"] = v.category if v.ok else f"{v.category}: {v.message[:300]}"
                if v.ok:
                    s, reps, trials = cb.time_variant(runner, bench, stream, args.budget_s, slow_ok=True)
                    k["ms"], k["timed"] = s.median_ms, f"{trials}x{reps}"
            tv = timed(bench.vendor_call(), bench.refill, stream, budget_s=args.budget_s)
            row["torch_ms"] = tv.summary.median_ms
            del bench
            torch.cuda.empty_cache()
        except Exception as e:  # report and keep going
            row["error"] = f"{type(e).__name__}: {e}"
            cb.log(traceback.format_exc(), sink)
        for label in ["naive", *(r[0] for r in runs)]:
            h = digest.get((n, label))
            row[label] = dict(row["kernels"].get(h, {}), digest=h) if h else {"check": "no kernel"}
        naive_ms = row["naive"].get("ms")
        for label, _ in runs:
            ms = row[label].get("ms")
            row[label]["x_naive"] = naive_ms / ms if ms and naive_ms else None
            row[label]["x_torch"] = row.get("torch_ms") / ms if ms and row.get("torch_ms") else None
            row[label]["same_as_naive"] = row[label].get("digest") == row["naive"].get("digest")
        cb.log(f"{n}: naive {naive_ms or 0:.4f} ms, torch {row.get('torch_ms') or 0:.4f} ms; "
               + ", ".join(f"{lb} {row[lb].get('ms') or 0:.4f} ms ({row[lb].get('check')})" for lb, _ in runs), sink)
    stamp = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    labels = [r[0] for r in runs]
    lines = [f"{stamp}; {dev}; torch {torch.__version__}; suite {args.suite}; budget {args.budget_s} s per kernel",
             "| workload | bench shape | naive ms | torch ms | " + " | ".join(f"{lb} ms | x naive | x torch" for lb in labels)
             + " |", "|---|---|---|---|" + "---|---|---|" * len(labels)]
    for r in rows:
        shape = "x".join(str(v) for v in (r.get("bench") or {}).values())
        cells = [r["name"], shape, f"{r['naive'].get('ms') or 0:.4f}", f"{r.get('torch_ms') or 0:.4f}"]
        for lb in labels:
            k = r[lb]
            ok = k.get("check") == "ok"
            cells += [f"{k['ms']:.4f}" if ok else k.get("check", "")[:40],
                      f"{k['x_naive']:.2f}" if ok and k.get("x_naive") else "-",
                      f"{k['x_torch']:.2f}" if ok and k.get("x_torch") else "-"]
        lines.append("| " + " | ".join(cells) + " |")
    lines.append("")
    for lb in labels:
        xs = [r[lb].get("x_naive") for r in rows if r[lb].get("check") == "ok"]
        ts = [r[lb].get("x_torch") for r in rows if r[lb].get("check") == "ok"]
        bad = [r["name"] for r in rows if r[lb].get("check") not in ("ok", "no kernel")]
        g, gt = geomean(xs), geomean(ts)
        lines.append(f"{lb}: {len(xs)} kernels checked ok, geomean x naive {g or 0:.2f}, x torch {gt or 0:.2f}; "
                     f"{sum(1 for x in xs if x and x > 1.1)} over 1.1x naive; failed: {', '.join(bad) or 'none'}")
    cb.log("\n".join(lines), sink)
    if out:
        (out / "materialized_bench.json").write_text(json.dumps({"date": stamp, "device": dev, "torch": torch.__version__,
                                                                 "suite": args.suite, "runs": dict(runs), "rows": rows},
                                                                indent=1, default=str))
    if sink:
        sink.close()
    return 0 if all(r[lb].get("check") in ("ok", "no kernel") for r in rows for lb in labels) else 1


if __name__ == "__main__":
    sys.exit(main())
