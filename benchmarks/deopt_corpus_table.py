"""De-optimization operators over the expert corpus: sites found per operator, and how many
single-site removals pass the gate (issue 5's measure).

    .venv/bin/python benchmarks/deopt_corpus_table.py [--ops ldg,vectorize,...] [--jobs N]
        [--backend emu|cuda ...] [--out DIR]

For every expert.cu under expert_kernels/ and examples/, every operator's `find` sites; each site is
removed alone from the expert (the walker's first step) and the result is gated against the
workload with each backend asked for. Writes deopt_corpus.jsonl (one row per site) and
deopt_corpus.md (the per-operator table and the refusals/rejections with their reasons) to --out,
and prints the table.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections import defaultdict
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from klineage.deopt import registry  # noqa: E402
from klineage.deopt.base import Refused  # noqa: E402
from klineage.gates.backend import GateOptions  # noqa: E402
from klineage.gates.gate import gate  # noqa: E402
from klineage.source.model import CudaSource  # noqa: E402


def corpus() -> list[Path]:
    return sorted((ROOT / "expert_kernels").glob("*/expert.cu")) + sorted(
        (ROOT / "examples").glob("*/expert.cu")
    )


def candidates(ops: list[str], workloads: set[str] | None = None) -> list[dict[str, Any]]:
    """One row per (file, operator, site), with the removed text or why there is none."""
    rows = []
    for f in corpus():
        if workloads and f.parent.name not in workloads:
            continue
        src = CudaSource.from_file(f)
        for name in ops:
            op = registry.get_operator(name)
            for site in op.find(src):
                row: dict[str, Any] = {
                    "workload": f.parent.name,
                    "file": str(f.relative_to(ROOT)),
                    "op": name,
                    "line": site.line,
                    "summary": site.summary,
                }
                try:
                    row["text"] = op.remove(src, site).text
                    row["status"] = "removed"
                except Refused as e:
                    row.update(status="refused", message=str(e))
                except Exception as e:  # noqa: BLE001 - an operator bug is a row of the table, not a crash
                    row.update(status="error", message=f"{type(e).__name__}: {e}")
                rows.append(row)
    return rows


PROGRESS: Path | None = None


def run_gate(row: dict[str, Any], backend: str) -> None:
    t0 = time.perf_counter()
    r = gate(
        row["text"],
        ROOT / row["file"].rsplit("/", 1)[0],
        GateOptions(backend=backend),
        name=f"{row['workload']}.{row['op']}.L{row['line']}.cu",
    )
    row[backend] = {
        "accepted": r.accepted,
        "category": r.category,
        "message": r.message[:400],
        "secs": round(time.perf_counter() - t0, 1),
    }
    if PROGRESS is not None:  # one line per finished gate, so a long run can be read while it goes
        with PROGRESS.open("a") as fh:
            fh.write(json.dumps({k: v for k, v in row.items() if k != "text"} | {"backend": backend}) + "\n")


def table(rows: list[dict[str, Any]], ops: list[str], backends: list[str]) -> str:
    per: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
    for r in rows:
        p = per[r["op"]]
        p["sites"] += 1
        p[r["status"]] += 1
        for b in backends:
            if b in r:
                p[f"{b}_pass"] += int(r[b]["accepted"])
                p[f"{b}_unsupported"] += int(r[b]["category"] == "unsupported")
    head = (
        "| operator | sites | removed | refused | "
        + " | ".join(f"{b} pass | {b} unsupported" for b in backends)
        + " |"
    )
    lines = [head, "|" + "---|" * (4 + 2 * len(backends))]
    for name in ops:
        p = per[name]
        cells = [name, p["sites"], p["removed"], p["refused"] + p["error"]]
        for b in backends:
            cells += [p[f"{b}_pass"], p[f"{b}_unsupported"]]
        lines.append("| " + " | ".join(str(c) for c in cells) + " |")
    lines.append("")
    lines.append("Not accepted (refusals, rejections):")
    for r in rows:
        if r["status"] != "removed":
            lines.append(f"- {r['workload']} {r['op']} line {r['line']}: {r['status']}: {r['message'][:200]}")
        for b in backends:
            if b in r and not r[b]["accepted"]:
                lines.append(
                    f"- {r['workload']} {r['op']} line {r['line']}: {b} {r[b]['category']}: {r[b]['message'][:200]}"
                )
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument(
        "--ops", default="", help="comma-separated operator names (default: every registered operator)"
    )
    ap.add_argument("--backend", action="append", default=[], help="emu (default) and/or cuda")
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--workloads", default="", help="comma-separated workload folders (default: all)")
    ap.add_argument("--out", default="")
    args = ap.parse_args()
    ops = [o for o in args.ops.split(",") if o] or [o.name for o in registry.operators()]
    backends = args.backend or ["emu"]
    global PROGRESS
    if args.out:
        Path(args.out).mkdir(parents=True, exist_ok=True)
        PROGRESS = Path(args.out) / "progress.jsonl"
    rows = candidates(ops, {w for w in args.workloads.split(",") if w} or None)
    todo = [(r, b) for r in rows if r["status"] == "removed" for b in backends]
    with ThreadPoolExecutor(max_workers=max(1, args.jobs)) as pool:
        list(pool.map(lambda rb: run_gate(*rb), todo))
    md = table(rows, ops, backends)
    print(md)
    if args.out:
        out = Path(args.out)
        out.mkdir(parents=True, exist_ok=True)
        with (out / "deopt_corpus.jsonl").open("w") as fh:
            for r in rows:
                fh.write(json.dumps({k: v for k, v in r.items() if k != "text"}) + "\n")
        (out / "deopt_corpus.md").write_text(md + "\n")


if __name__ == "__main__":
    main()
