"""Lineage coverage of the public lineages (issue 23's second line), scratch tool of s15-walks:
per lineage folder (expert.cu, naive.cu, root.cu = the emu walk's end state, workload.py), build
the three with the cuda gate's build, check each on the test shapes (two seeds), time each and
torch at the bench shape, and print ln(t_root / t_expert) / ln(t_naive / t_expert).

    python3 .devwork/s15-walks/lineage_time.py --out "$OUT/s15-walks" --deadline-s 75 [--dry-run]
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ORDER = (
    "flash_minimal",
    "hgemm_wmma_base",
    "llmc_softmax_online8",
    "llmc_softmax_v4",
    "llmc_layernorm_v5",
    "leimao_gemm_v03",
    "leimao_gemm_v04",
    "leimao_gemm_v05",
)


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--out", type=Path, required=True)
    p.add_argument("--deadline-s", type=float, default=75.0)
    p.add_argument("--budget-s", type=float, default=0.6)
    p.add_argument("--only", default="")
    p.add_argument("--dry-run", action="store_true")
    a = p.parse_args()
    names = [n for n in ORDER if not a.only or n in a.only.split(",")]
    sources = {(n, v): HERE / "lineages" / n / f"{v}.cu" for n in names for v in ("expert", "root", "naive")}
    missing = [str(s) for s in sources.values() if not s.exists()]
    if missing or a.dry_run:
        for (n, v), s in sources.items():
            print(f"{n:22} {v:6} {s.relative_to(HERE)} {'ok' if s.exists() else 'MISSING'}")
        return 1 if missing else 0
    from klineage.timing_bench import gpu

    t0 = time.perf_counter()
    a.out.mkdir(parents=True, exist_ok=True)
    sink = open(a.out / "lineage_time.log", "w")  # noqa: SIM115
    built = gpu.build_sources(sources, len(names), sink)
    dev = gpu.open_device(a.budget_s, lambda: time.perf_counter() - t0 > a.deadline_s)
    rows = []
    for n in names:
        row = gpu.time_workload(n, HERE / "lineages" / n, built, dev, sink)
        rows.append(row)
        (a.out / "lineage_time.json").write_text(json.dumps(rows, indent=1, default=str))
    lines = [
        f"lineage coverage, {dev.name}, torch {dev.torch_version}, wall {time.perf_counter() - t0:.0f} s",
        "| lineage | naive ms | root ms | expert ms | torch ms | coverage | checks |",
        "|---|---:|---:|---:|---:|---:|---|",
    ]
    for r in rows:
        k = r.get("kernels", {})
        ms = {v: k.get(v, {}).get("ms") for v in ("naive", "root", "expert")}
        cov = "-"
        if all(ms.values()) and ms["naive"] > ms["expert"]:
            cov = f"{math.log(ms['root'] / ms['expert']) / math.log(ms['naive'] / ms['expert']):.2f}"
        checks = ", ".join(f"{v} {k.get(v, {}).get('check', '-')[:60]}" for v in ("naive", "root", "expert"))
        fmt = {v: f"{x:.4f}" if x else "-" for v, x in ms.items()}
        tms = f"{r['torch_ms']:.4f}" if r.get("torch_ms") else "-"
        lines.append(
            f"| {r['name']} | {fmt['naive']} | {fmt['root']} | {fmt['expert']} | {tms} | {cov} | {checks} |"
            + (f" error: {r['error'][:120]}" if r.get("error") else "")
        )
    text = "\n".join(lines)
    (a.out / "lineage_time.md").write_text(text + "\n")
    gpu.log(text, sink)
    sink.close()
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
