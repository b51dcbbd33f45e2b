"""Lineage coverage on the GPU (DESIGN.md, 'Figures'): how much of the expert's speedup over the
naive kernel the mined lineage explains, ln(t_root / t_expert) / ln(t_naive / t_expert).

Three steps, so that the GPU call only times:

    python benchmarks/lineage_bench.py prepare --db skills_db/skills.duckdb   # here: root states -> files
    python3 benchmarks/corpus_bench.py --check --out "$OUT" $(python3 benchmarks/lineage_bench.py variants)
    python3 benchmarks/lineage_bench.py coverage "$OUT/corpus_bench.json"      # table

`prepare` writes each workload's simplest mined state (the lineage root) to
benchmarks/lineage_roots/<workload>/root.cu with the depth and store it came from; the corpus
benchmark times it beside expert, naive and torch in the same run (`--variant W:root=FILE`).
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
ROOTS = ROOT / "benchmarks" / "lineage_roots"


def prepare(db: Path) -> int:
    sys.path.insert(0, str(ROOT))
    from klineage import lineage
    from klineage.store.db import Store
    from klineage.store.lineage import state_sources, state_workloads

    with Store(
        db, read_only=True
    ) as store:  # the root: the end of the taken path (a beam walk has several deepest states)
        roots = {w: lineage.build(store, w).graph["root"] for w in state_workloads(store)}
        rows = [r for r in state_sources(store) if roots[r.workload] == r.state_hash]
    for r in rows:
        d = ROOTS / r.workload
        d.mkdir(parents=True, exist_ok=True)
        (d / "root.cu").write_text(r.source)
        (d / "root.json").write_text(
            json.dumps({"workload": r.workload, "depth": r.depth, "db": str(db)}) + "\n"
        )
        print(f"{r.workload}: root at depth {r.depth}")
    return 0


def variants() -> int:
    args = [f"--variant={p.parent.name}:root={p}" for p in sorted(ROOTS.glob("*/root.cu"))]
    print(" ".join(args))
    return 0


def coverage(report: Path) -> int:
    doc = json.loads(report.read_text())
    print(f"lineage coverage — {doc.get('date')}, {doc.get('device')}, torch {doc.get('torch')}")
    print(f"{'workload':20} {'depth':>5} {'naive ms':>10} {'root ms':>10} {'expert ms':>10} {'coverage':>9}")
    values = []
    for r in doc["results"]:
        v = r["variants"]
        t = {k: (v.get(k) or {}).get("median_ms") for k in ("naive", "root", "expert")}
        meta = ROOTS / r["workload"] / "root.json"
        depth = json.loads(meta.read_text())["depth"] if meta.exists() else "-"
        cov = "-"
        if all(t.values()) and t["naive"] > t["expert"]:
            c = math.log(t["root"] / t["expert"]) / math.log(t["naive"] / t["expert"])
            values.append(c)
            cov = f"{c:.2f}"
        fmt = lambda x: "-" if x is None else f"{x:.4f}"  # noqa: E731
        print(
            f"{r['workload']:20} {depth!s:>5} {fmt(t['naive']):>10} {fmt(t['root']):>10} {fmt(t['expert']):>10} {cov:>9}"
        )
    if values:
        print(f"mean coverage {sum(values) / len(values):.2f} over {len(values)} workloads")
    return 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("prepare")
    p.add_argument("--db", type=Path, default=ROOT / "skills_db" / "skills.duckdb")
    sub.add_parser("variants")
    c = sub.add_parser("coverage")
    c.add_argument("report", type=Path)
    a = ap.parse_args(argv)
    if a.cmd == "prepare":
        return prepare(a.db)
    if a.cmd == "variants":
        return variants()
    return coverage(a.report)


if __name__ == "__main__":
    sys.exit(main())
