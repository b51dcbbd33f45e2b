"""Materializer benchmark, leave-one-out: for every expert workload, start from its naive.cu with
the skills mined from the *other* workloads only, run the offline materializer (budget 10) in
curriculum order, in random order (seeded) and with no skills (operators in registry order).

    python benchmarks/materialize_bench.py --db skills_db/skills.duckdb --backend emu
    python benchmarks/materialize_bench.py --db /tmp/gpu.duckdb --mine --backend cuda   # on the H200

On the GPU (`--backend cuda`) each run reports the speedup of the best kernel over naive.cu and
over torch, measured by the cuda gate in the same run; the geometric means per mode come last. On
the CPU (`--backend emu`, no timing) it reports the static effect: skills kept, and the
optimizations (operators with `find` sites) present in the best kernel against naive.cu.

Leave-one-out: a skill is used for workload W only if one of its lineages comes from another
workload; W's provenance, effects, risks and scope entries are removed and its dtypes recomputed
from the remaining workloads, so nothing measured on W informs W's run.
"""

from __future__ import annotations

import argparse
import copy
import json
import math
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from klineage.deopt.registry import operators  # noqa: E402
from klineage.gates.backend import GateOptions  # noqa: E402
from klineage.materialize import MaterializeOptions, make_provider, materialize  # noqa: E402
from klineage.materialize.judge import site_counts  # noqa: E402
from klineage.skills import Skill, load_skills, merge  # noqa: E402
from klineage.store.db import Store  # noqa: E402
from klineage.workload import load_workload  # noqa: E402

MODES = {  # name -> (skills mode, order)
    "curriculum": ("all", "curriculum"),
    "random": ("all", "random"),
    "none": ("none", "curriculum"),
}


def leave_one_out(skills: list[Skill], held_out: str, dtypes_of: dict[str, list[str]]) -> list[Skill]:
    """The skills with at least one lineage outside `held_out`, stripped of everything from it."""
    out = []
    for s in skills:
        prov = [p for p in s.provenance if p.get("workload") != held_out]
        if not prov:
            continue
        t = copy.deepcopy(s)
        t.provenance = prov
        per = t.effects.get("per_workload", {})
        t.effects = {**t.effects, "per_workload": {w: e for w, e in per.items() if w != held_out}}
        t.risks = [r for r in t.risks if r.get("workload") != held_out]
        workloads = sorted({p.get("workload") for p in prov if p.get("workload")})
        t.scope = {**t.scope, "workloads": workloads,
                   "dtypes": sorted({d for w in workloads for d in dtypes_of.get(w, [])}) or t.scope.get("dtypes", [])}
        out.append(t)
    return out


def load_merged(dbs: list[Path]) -> list[Skill]:
    """Skills of several stores (mined in parallel, say); the same skill id merges its evidence."""
    by_id: dict[str, Skill] = {}
    for db in dbs:
        with Store(db, read_only=True) as s:
            for sk in load_skills(s):
                by_id[sk.skill_id] = merge(by_id[sk.skill_id], sk) if sk.skill_id in by_id else sk
    return [by_id[k] for k in sorted(by_id)]


def present(text: str) -> set[str]:
    return {name for name, n in site_counts(text, operators()).items() if n}


def geomean(xs: list[float]) -> float | None:
    xs = [x for x in xs if x and x > 0]
    return math.exp(sum(map(math.log, xs)) / len(xs)) if xs else None


def run_one(folder: Path, skills: list[Skill], mode: str, args: argparse.Namespace, store: Store) -> dict[str, Any]:
    wl = load_workload(folder)
    naive = (folder / "naive.cu").read_text()
    skills_mode, order = MODES[mode]
    t0 = time.perf_counter()
    res = materialize(wl, naive, skills, make_provider("offline"), args.budget, MaterializeOptions(
        backend=args.backend, skills_mode=skills_mode, order=order, seed=args.seed, store=store,
        out_dir=args.out / folder.name / mode, gate_options=GateOptions(backend=args.backend, timeout_s=args.timeout)))
    before, after = present(naive), present(res.best_source)
    return {
        "workload": folder.name, "mode": mode, "status": res.status, "stop_reason": res.stop_reason,
        "skills_available": len(skills) if skills_mode == "all" else 0, "gated": res.gated,
        "kept": sum(s.kept for s in res.steps), "applied": res.applied or [s.move for s in res.steps if s.kept],
        "rejected": [f"{s.move}: {s.category}" for s in res.steps if s.verdict == "rejected"],
        "ops_naive": sorted(before), "ops_best": sorted(after), "ops_added": sorted(after - before),
        "naive_ms": res.start_time_ms, "best_ms": res.best_time_ms, "torch_ms": res.torch_time_ms,
        "speedup": res.speedup, "speedup_vs_torch": res.speedup_vs_torch,
        "start_ok": res.start_gate.get("accepted"), "elapsed_s": round(time.perf_counter() - t0, 1),
        "run_id": res.run_id,
    }


def table(rows: list[dict[str, Any]], gpu: bool) -> str:
    head = ["workload", "mode", "skills", "gated", "kept", "ops added (best vs naive)"]
    head += ["x naive", "x torch"] if gpu else []
    lines = [" | ".join(head), " | ".join("---" for _ in head)]
    for r in rows:
        cells = [r["workload"], r["mode"], str(r["skills_available"]), str(r["gated"]), str(r["kept"]),
                 (", ".join(r["ops_added"]) or "-") if r["start_ok"] else
                 (r["status"] if r["status"].startswith("error") else "start kernel rejected")]
        if gpu:
            cells += [f"{r['speedup']:.2f}" if r["speedup"] else "-",
                      f"{r['speedup_vs_torch']:.2f}" if r["speedup_vs_torch"] else "-"]
        lines.append(" | ".join(cells))
    lines.append("")
    for mode in MODES:
        rs = [r for r in rows if r["mode"] == mode]
        if not rs:
            continue
        line = (f"{mode}: {sum(r['kept'] for r in rs)} steps kept over {len(rs)} workloads, "
                f"{sum(len(r['ops_added']) for r in rs)} optimizations added, {sum(r['gated'] for r in rs)} gated")
        if gpu:
            g, gt = geomean([r["speedup"] for r in rs]), geomean([r["speedup_vs_torch"] for r in rs])
            line += f"; geomean speedup over naive {g:.2f}x" if g else ""
            line += f", vs torch {gt:.2f}x" if gt else ""
        lines.append(line)
    return "\n".join(lines)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--corpus", type=Path, default=ROOT / "expert_kernels")
    ap.add_argument("--db", type=Path, action="append",
                    help="mined skill store; repeat to merge several (default: skills_db/skills.duckdb)")
    ap.add_argument("--mine", action="store_true", help="mine the corpus into --db first (same backend)")
    ap.add_argument("--max-steps", type=int, default=40, help="mining: backward steps per expert kernel")
    ap.add_argument("--backend", choices=("emu", "cuda"), default="emu")
    ap.add_argument("--budget", type=int, default=10)
    ap.add_argument("--seed", type=int, default=0, help="seed of the random order")
    ap.add_argument("--modes", default=",".join(MODES), help="comma list of curriculum, random, none")
    ap.add_argument("--workloads", default="", help="comma list (default: every folder of the corpus)")
    ap.add_argument("--timeout", type=float, default=300.0, help="seconds per gate stage")
    ap.add_argument("--out", type=Path, default=ROOT / "build" / "materialize_bench")
    ap.add_argument("--jobs", type=int, default=1, help="runs at once (GPU timings still take turns)")
    ap.add_argument("--json", action="store_true", help="print the rows as JSON instead of the table")
    ap.add_argument("--combine", type=Path, nargs="+", metavar="BENCH_JSON",
                    help="only print one table from the bench.json files of earlier runs (e.g. modes run in parallel)")
    args = ap.parse_args()
    if args.combine:
        rows = [r for f in args.combine for r in json.loads(f.read_text())]
        order = {m: i for i, m in enumerate(MODES)}
        rows.sort(key=lambda r: (r["workload"], order.get(r["mode"], 9)))
        print(table(rows, args.backend == "cuda" or any(r.get("speedup") for r in rows)))
        return 0

    corpus = sorted(p.parent for p in args.corpus.glob("*/naive.cu") if (p.parent / "workload.py").is_file())
    folders = corpus
    if args.workloads:
        wanted = args.workloads.split(",")
        folders = [f for f in folders if f.name in wanted]
    modes = [m for m in args.modes.split(",") if m]
    if not folders or any(m not in MODES for m in modes):
        print(f"nothing to run (workloads: {[f.name for f in folders]}, modes: {modes})", file=sys.stderr)
        return 2
    dbs = args.db or [ROOT / "skills_db" / "skills.duckdb"]
    if args.mine:
        from klineage.mining import mine_corpus

        mine_corpus(folders, db=dbs[0], backend=args.backend, max_steps=args.max_steps, workers=1, roundtrip=False,
                    timeout_s=args.timeout)
    skills = load_merged(dbs)
    # every corpus workload's dtypes, not only the selected ones': a skill's scope dtypes are
    # recomputed from its other workloads, and with those unknown it would keep the held-out's own
    dtypes_of = {}
    names = {}
    for f in corpus:
        wl = load_workload(f)
        dtypes_of[wl.name], names[f] = wl.dtypes, wl.name
    args.out.mkdir(parents=True, exist_ok=True)
    runs = [(f, mode) for f in folders for mode in modes]
    partial_lock = threading.Lock()
    (args.out / "rows.jsonl").unlink(missing_ok=True)
    with Store(args.out / "runs.duckdb") as store:
        loo_of = {f: leave_one_out(skills, names[f], dtypes_of) for f in folders}  # once per workload, not per mode

        def one(f: Path, mode: str) -> dict[str, Any]:
            loo = loo_of[f]
            try:
                row = run_one(f, loo, mode, args, store)
            except Exception as e:  # one broken run (a gate or operator bug) must not lose the others
                row = {"workload": f.name, "mode": mode, "status": f"error: {type(e).__name__}: {e}",
                       "stop_reason": "", "skills_available": len(loo), "gated": 0, "kept": 0, "applied": [],
                       "rejected": [], "ops_naive": [], "ops_best": [], "ops_added": [], "start_ok": False,
                       "speedup": None, "speedup_vs_torch": None, "elapsed_s": 0}
            x = f" x{row['speedup']:.2f} naive, x{row['speedup_vs_torch'] or 0:.2f} torch" if row["speedup"] else ""
            print(f"{row['workload']:<20} {mode:<11} gated {row['gated']:>2} kept {row['kept']:>2} "
                  f"added {','.join(row['ops_added']) or '-'}{x} ({row['elapsed_s']} s)", file=sys.stderr, flush=True)
            with partial_lock, (args.out / "rows.jsonl").open("a") as fh:  # kept if the run is cut short
                fh.write(json.dumps(row, default=str) + "\n")
            return row

        # --jobs runs at once: builds in parallel, cuda gate children take turns on the GPU (device lock)
        with ThreadPoolExecutor(max_workers=max(1, args.jobs)) as pool:
            rows = list(pool.map(lambda fm: one(*fm), runs))
    (args.out / "bench.json").write_text(json.dumps(rows, indent=1, default=str) + "\n")
    if args.json:
        print(json.dumps(rows, indent=1, default=str))
    else:
        print(f"\nmaterialize_bench: {len(folders)} workloads, backend {args.backend}, budget {args.budget}, "
              f"skills from {', '.join(map(str, dbs))} ({len(skills)}), leave-one-out\n")
        print(table(rows, args.backend == "cuda"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
