"""Held-out instances on the GPU: every naive.cu through the correctness protocol on its `test`
shapes (two seeds; the emulator only sees the `emu` shapes), then the naive kernel and the
workload's vendor call (torch) timed at the bench shape with the `cuda` gate's timing — the
baseline that `klineage heldout --backend cuda` speedups start from.

    source benchmarks/gpu_env.sh && python3 heldout/gpu_check.py --out "$OUT"

Reuses benchmarks/corpus_bench.py's build, timing and bandwidth helpers. A naive launch over
200 ms is timed once. Exit 1 when any check fails.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
import traceback
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
HELDOUT = ROOT / "heldout"
sys.path.insert(0, str(ROOT / "benchmarks"))


def main(argv: list[str] | None = None) -> int:
    import corpus_bench as cb
    import torch

    from klineage import load_workload
    from klineage.gates.cuda.runner import CudaRunner
    from klineage.gates.cuda.timing import Bench, timed
    from klineage.gates.protocol import check_workload

    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--only", default="", help="comma-separated instances (default: all)")
    p.add_argument("--out", default="", help="folder for heldout_gpu.log and heldout_gpu.json")
    p.add_argument("--budget-s", type=float, default=3.0, help="timing budget per naive kernel / torch call")
    args = p.parse_args(argv)
    out = Path(args.out) if args.out else None
    if out:
        out.mkdir(parents=True, exist_ok=True)
    sink = open(out / "heldout_gpu.log", "w") if out else None  # noqa: SIM115
    names = sorted(d.name for d in HELDOUT.iterdir() if (d / "naive.cu").is_file())
    if args.only:
        names = [n for n in names if n in args.only.split(",")]
    t0 = time.perf_counter()
    built = cb.build_all([(n, "naive", HELDOUT / n / "naive.cu") for n in names],
                         Path(tempfile.mkdtemp(prefix="heldout_gpu_")))
    cb.log(f"built {len(names)} naive kernels in {time.perf_counter() - t0:.1f} s", sink)
    device = torch.device("cuda", torch.cuda.current_device())
    copy_bps = cb.copy_bandwidth()
    dev = torch.cuda.get_device_name(device)
    cb.log(f"device {dev}; torch {torch.__version__}; copy {copy_bps / 1e12:.3f} TB/s", sink)
    rows = []
    for n in names:
        row: dict = {"name": n}
        rows.append(row)
        try:
            wl = load_workload(HELDOUT / n)
            b = built[(n, "naive")]
            if not b.ok:
                row["check"] = f"build failed: {b.message}"
                continue
            runner = CudaRunner(b.library, wl, device)
            v = check_workload(wl, runner, "test", seeds=(0, 1))
            row["check"] = v.category if v.ok else f"{v.category}: {v.message}"
            bindings = wl.shape_set("bench")[0]
            row["bench"] = bindings
            bench = Bench(wl, bindings, device)
            stream = torch.cuda.current_stream(device)
            s, reps, trials = cb.time_variant(runner, bench, stream, args.budget_s, slow_ok=True)
            row["naive_ms"], row["timed"] = s.median_ms, f"{trials}x{reps}"
            tv = timed(bench.vendor_call(), bench.refill, stream, budget_s=args.budget_s)
            row["torch_ms"] = tv.summary.median_ms
            nbytes = wl.bytes_moved(bindings)
            row["naive_copy"] = nbytes / (s.median_ms * 1e-3) / copy_bps
            row["torch_copy"] = nbytes / (tv.summary.median_ms * 1e-3) / copy_bps
            del bench
            torch.cuda.empty_cache()
        except Exception as e:  # report and keep going
            row["check"] = row.get("check", "") + f" ERROR {type(e).__name__}: {e}"
            cb.log(traceback.format_exc(), sink)
        cb.log(f"{n}: {row.get('check')} naive {row.get('naive_ms', 0):.4f} ms torch {row.get('torch_ms', 0):.4f} ms",
               sink)
    stamp = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    lines = [f"{stamp}; {dev}; torch {torch.__version__}; copy {copy_bps / 1e12:.2f} TB/s",
             "| instance | bench shape | check (test shapes) | naive ms | torch ms | torch vs naive | naive %copy | torch %copy |",
             "|---|---|---|---|---|---|---|---|"]
    for r in rows:
        shape = "x".join(str(v) for v in (r.get("bench") or {}).values())
        nm, tm = r.get("naive_ms"), r.get("torch_ms")
        lines.append(f"| {r['name']} | {shape} | {r.get('check', '')} | {nm or 0:.4f} | {tm or 0:.4f} | "
                     f"{(nm / tm) if nm and tm else 0:.2f}x | {r.get('naive_copy', 0):.0%} | {r.get('torch_copy', 0):.0%} |")
    cb.log("\n".join(lines), sink)
    if out:
        (out / "heldout_gpu.json").write_text(json.dumps({"date": stamp, "device": dev, "rows": rows}, indent=1,
                                                          default=str))
    if sink:
        sink.close()
    return 0 if all(r.get("check") == "ok" for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
