"""Scale-out benchmark (issue 14): the same corpus mined with the `local` executor at several
worker counts and with the `ray` executor; wall time, and whether every run stored the same rows.

`mine_corpus` walks up to `workers` workloads at once (threads of the driver sharing one
executor), so N workers are used across workloads even when each step's first candidate passes.
Each configuration starts cold: its own gate cache ($KLINEAGE_HOME) and its own DuckDB file, so
every candidate is gated in every run. Rows are compared without timings (elapsed seconds differ
by nature): states, steps (verdicts, taken, roundtrip), kernels, gate verdicts and skills.
`--max-steps N` bounds every walk at N backward steps (passed to `mine_corpus`), so the whole
`expert_kernels/` corpus can be timed in minutes rather than hours. CORPUS is any mix of corpus
folders and single workload folders, mined in the order given.

    python benchmarks/scale_bench.py                                   # 2-core CI box: local 1, local 2, ray
    python benchmarks/scale_bench.py --workers 1,14 --no-ray           # 16-core GPU box, emu
    python benchmarks/scale_bench.py expert_kernels --max-steps 3 --workers 1,14 --no-ray   # bounded, whole corpus
    python benchmarks/scale_bench.py expert_kernels/softmax expert_kernels/rmsnorm --max-steps 3 --no-ray  # a subset
    python benchmarks/scale_bench.py --backend cuda --workers 1 --ray-cpus 1   # 1-GPU Ray worker vs local
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from klineage.executor import GateExecutor, make_executor  # noqa: E402
from klineage.mining import mine_corpus  # noqa: E402
from klineage.store.db import Store  # noqa: E402
from klineage.store.lineage import table_rows  # noqa: E402


@dataclass
class Run:
    executor: str
    workers: int
    start_s: float  # making the executor (Ray: starting or joining the instance)
    mine_s: float
    gate_runs: int
    accepted: int
    skills: int
    identical: bool | None = None


def snapshot(db: Path) -> dict[str, Any]:
    """Every stored row that mining decides, without timings or run ids."""
    with Store(db, read_only=True) as s:
        t = table_rows(s)
        return {
            "states": sorted((r["workload"], r["state_hash"], r["depth"]) for r in t["states"]),
            "steps": sorted(
                (
                    r["step_id"],
                    r["from_state"],
                    r["to_state"] or "",
                    r["operator"],
                    bool(r["accepted"]),
                    r["category"],
                    r["message"] or "",
                    bool(r["taken"]),
                    str(r["roundtrip_ok"]),
                    r["carrier"] or "",
                    r["gate_key"] or "",
                )
                for r in t["steps"]
            ),
            "kernels": sorted(r["kernel_hash"] for r in t["kernels"]),
            "gate_runs": sorted(
                (r["gate_key"], bool(r["accepted"]), r["category"], r["message"] or "")
                for r in t["gate_runs"]
            ),
            "skills": sorted(r["skill_id"] for r in t["skills"]),
        }


def mine_once(
    corpus: list[Path], kind: str, workers: int, args: argparse.Namespace, work: Path
) -> tuple[Run, dict]:
    home = work / f"home-{kind}-{workers}"
    os.environ["KLINEAGE_HOME"] = str(home)  # a cold cache for this configuration
    db = work / f"{kind}-{workers}.duckdb"
    t0 = time.perf_counter()
    pool: GateExecutor = make_executor(kind, workers=workers, backend=args.backend, address=args.address)
    started = time.perf_counter() - t0
    try:
        report = mine_corpus(
            corpus,
            db=db,
            backend=args.backend,
            max_steps=args.max_steps,
            workers=workers,
            timeout_s=args.timeout,
            executor=pool,
        )
    finally:
        pool.close()
    ws = report["workloads"]
    run = Run(
        kind,
        workers,
        started,
        report["elapsed_s"],
        sum(w["gate_runs"] for w in ws),
        sum(w["accepted"] for w in ws),
        report["skills"],
    )
    return run, snapshot(db)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument(
        "corpus",
        nargs="*",
        type=Path,
        default=[REPO / "tests/data/mining"],
        help="corpus or workload folders (default tests/data/mining)",
    )
    ap.add_argument("--backend", choices=("emu", "cuda"), default="emu")
    ap.add_argument("--workers", default="1,2", help="local worker counts, comma-separated (default 1,2)")
    ap.add_argument("--ray-cpus", type=int, default=0, help="Ray run's CPUs (default: the largest --workers)")
    ap.add_argument("--no-ray", action="store_true", help="local runs only (no Ray on this machine)")
    ap.add_argument("--address", default=None, help="a running Ray cluster instead of a local instance")
    ap.add_argument(
        "--max-steps",
        type=int,
        default=40,
        metavar="N",
        help="backward steps per walk at most, passed to mine_corpus (default 40, as `klineage mine`)",
    )
    ap.add_argument("--timeout", type=float, default=120.0, help="seconds per gate stage")
    ap.add_argument("--json", type=Path, default=None, help="also write the runs here")
    args = ap.parse_args(argv)
    counts = [int(w) for w in args.workers.split(",") if w.strip()]
    if args.max_steps < 0 or not counts or min(counts) < 1:
        ap.error("--max-steps must be >= 0 and every --workers count >= 1")
    load0 = os.getloadavg()
    plan = [("local", n) for n in counts]
    if not args.no_ray:
        plan.append(("ray", args.ray_cpus or max(counts)))
    runs: list[Run] = []
    first: dict | None = None
    with tempfile.TemporaryDirectory(prefix="scale-bench-") as tmp:
        for kind, n in plan:
            print(f"mining with {kind} x{n} ...", file=sys.stderr, flush=True)
            run, snap = mine_once(args.corpus, kind, n, args, Path(tmp))
            if first is None:
                first = snap
            run.identical = snap == first
            if not run.identical:
                for table in snap:
                    if snap[table] != first[table]:
                        print(f"  {kind} x{n}: table {table} differs from the first run", file=sys.stderr)
            runs.append(run)
            print(
                f"  {kind} x{n}: mine {run.mine_s:.1f} s, {run.gate_runs} gates, {run.accepted} steps,"
                f" identical {'yes' if run.identical else 'NO'}",
                file=sys.stderr,
                flush=True,
            )
    base = runs[0].mine_s
    load1 = os.getloadavg()
    print(
        f"backend {args.backend}, corpus {', '.join(str(c) for c in args.corpus)}, max steps {args.max_steps},"
        f" {os.cpu_count()} CPUs, load average (1/5/15 min) {'/'.join(f'{x:.2f}' for x in load0)} before,"
        f" {'/'.join(f'{x:.2f}' for x in load1)} after"
    )
    print(
        f"{'executor':<9} {'workers':>7} {'start s':>8} {'mine s':>8} {'speedup':>8} {'gates':>6} {'steps':>6}"
        f" {'skills':>6}  identical"
    )
    for r in runs:
        print(
            f"{r.executor:<9} {r.workers:>7} {r.start_s:>8.1f} {r.mine_s:>8.1f} {base / r.mine_s:>7.2f}x"
            f" {r.gate_runs:>6} {r.accepted:>6} {r.skills:>6}  {'yes' if r.identical else 'NO'}"
        )
    if args.json:
        args.json.write_text(json.dumps([asdict(r) for r in runs], indent=1))
    return 0 if all(r.identical for r in runs) else 1


if __name__ == "__main__":
    raise SystemExit(main())
