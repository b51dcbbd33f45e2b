"""Materializer benchmark, leave-one-out: for every expert workload, start from its naive.cu with
the skills mined from the *other* workloads only, run the offline materializer (budget 10) in
curriculum order, in random order (seeded) and with no skills (operators in registry order).
`--seeds N` runs the random order with seeds 0..N-1 (labels random-s0, random-s1, ...).

    python benchmarks/materialize_bench.py --db skills_db/skills.duckdb --backend emu
    python benchmarks/materialize_bench.py --db /tmp/gpu.duckdb --mine --backend cuda   # on the H200

On the GPU (`--backend cuda`) each run reports the speedup of the best kernel over naive.cu and
over torch, measured by the cuda gate in the same run; the geometric means per mode come last. On
the CPU (`--backend emu`, no timing) it reports the static effect: skills kept, and the
optimizations (operators with `find` sites) present in the best kernel against naive.cu.

Leave-one-out: a skill is used for workload W only if one of its lineages comes from another
workload; W's provenance, effects, risks and scope entries are removed and its dtypes recomputed
from the remaining workloads, so nothing measured on W informs W's run.

Budget curve: with the CPU keep rule (correct + the skill's static effect present) and the
deterministic offline provider, a run with budget k makes exactly the first steps of the budget-N
run, up to its k-th gated candidate (or its 3k-th proposal, the loop's other limit). So one run
per (workload, label) gives the best kernel at every budget 1..N: the last kept candidate among
those steps, else the start kernel (with a tournament: the step's `best_file`, the kernel that led
after it). They are written to OUT/curve/LABEL/WORKLOAD/budget-K.cu, and
OUT/curve.json indexes them (paths relative to OUT) with the skills applied so far, for
benchmarks/materialized_bench.py --curve. `--curve-only` rebuilds them from an earlier run's
trace.json files without gating anything. With `--backend cuda` the files are written too, but
they are only that run's best after k candidates: the GPU keep rule compares timings, which vary
from run to run, so a shorter run need not keep the same steps; OUT/curve_gpu.md then tables
that best after k candidates by the runs' own gate times, with the area under each mode's curve
(the geomean over k), which says which order gets there sooner.

The GPU keep rule without a cuda gate per candidate (`--measured`, materialize/measured.py): the
runs on the emulator list every correct candidate in OUT/candidates.json; the H200 times them in
one process (`materialized_bench.py --extra OUT/candidates.json`); the next round passes those
JSON files as `--measured` and the judge compares the measured times, with the tournament of
alternative skills (materialize/alternatives.py). Repeat until a round reports no candidate
judged without a time: its decisions are those of the GPU loop for those times, and with fixed
times a budget-k run is again a prefix of the budget-N run.

    python benchmarks/materialize_bench.py --seeds 5 --tournament --out R1           # round 1 (CPU)
    python3 benchmarks/materialized_bench.py --suite corpus --extra R1/candidates.json --out G1   # H200
    python benchmarks/materialize_bench.py --seeds 5 --measured G1/materialized_bench.json --out R2
"""

from __future__ import annotations

import argparse
import copy
import dataclasses
import hashlib
import json
import math
import sys
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from klineage.deopt.registry import operators  # noqa: E402
from klineage.errors import KLineageError  # noqa: E402
from klineage.gates.backend import GateOptions  # noqa: E402
from klineage.gates.result import Timing  # noqa: E402
from klineage.materialize import MaterializeOptions, make_provider, materialize  # noqa: E402
from klineage.materialize.judge import site_counts  # noqa: E402
from klineage.materialize.measured import MeasuredTimes, read_measured  # noqa: E402
from klineage.skills import Skill, load_skills, merge  # noqa: E402
from klineage.source.digest import source_hash  # noqa: E402
from klineage.store.db import Store  # noqa: E402
from klineage.workload import load_workload  # noqa: E402

MODES = {  # name -> (skills mode, order)
    "curriculum": ("all", "curriculum"),
    "random": ("all", "random"),
    "none": ("none", "curriculum"),
    "explore": ("all", "curriculum"),  # the curriculum, then the operator library (issue 24 part 3)
}
#: what runs without --modes (explore is asked for by name: it is the curriculum's run made longer)
DEFAULT_MODES = ("curriculum", "random", "none")


def leave_one_out(skills: list[Skill], held_out: str, dtypes_of: dict[str, list[str]]) -> list[Skill]:
    """The skills with at least one lineage outside `held_out`, stripped of everything from it."""
    out = []
    for s in skills:
        prov = [p for p in s.provenance if p.get("workload") != held_out]
        if not prov:
            continue
        t = copy.deepcopy(s)
        per = t.effects.get("per_workload", {})
        workloads = sorted({p.get("workload") for p in prov if p.get("workload")})
        out.append(
            dataclasses.replace(
                t,
                provenance=prov,
                effects={**t.effects, "per_workload": {w: e for w, e in per.items() if w != held_out}},
                risks=[r for r in t.risks if r.get("workload") != held_out],
                scope={
                    **t.scope,
                    "workloads": workloads,
                    "dtypes": sorted({d for w in workloads for d in dtypes_of.get(w, [])})
                    or t.scope.get("dtypes", []),
                },
            )
        )
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


def run_labels(modes: list[str], seed: int, seeds: int | None) -> list[tuple[str, str, int]]:
    """(label, mode, seed) of every run per workload: `random` becomes random-s0..random-s{N-1}
    with `seeds` N, else one run labelled `random` with `seed`."""
    out = []
    for mode in modes:
        if mode == "random" and seeds is not None:
            out += [(f"random-s{i}", mode, i) for i in range(seeds)]
        else:
            out.append((mode, mode, seed))
    return out


def prefix_steps(
    steps: list[dict[str, Any]], k: int, max_proposals: int | None = None
) -> list[dict[str, Any]]:
    """The steps a run with budget `k` makes, taken from a longer run's trace: the loop stops
    before a step once `k` candidates are gated or `max_proposals` (default 3k, the loop's
    default) steps are made; a step that is not gated (duplicate, no candidate) costs no budget."""
    limit = 3 * k if max_proposals is None else max_proposals
    out: list[dict[str, Any]] = []
    gated = 0
    for st in steps:
        if gated >= k or len(out) >= limit:
            break
        out.append(st)
        gated += bool(st.get("gated"))
    return out


def budget_curve(trace: dict[str, Any], budget: int) -> list[dict[str, Any]]:
    """Per budget k = 1..budget: the best kernel after the run's first k gated candidates (the
    last kept step's candidate_file, None for the start kernel), the kept steps and what they applied.
    A budget over the trace's own makes no sense (the run may have stopped for the budget)."""
    if budget > int(trace.get("budget") or 0):
        raise ValueError(f"budget {budget} is over the run's own ({trace.get('budget')})")
    steps = trace.get("steps") or []
    out = []
    for k in range(1, budget + 1):
        pre = prefix_steps(steps, k)
        kept = [st for st in pre if st.get("kept")]
        if pre and "best_file" in pre[-1]:  # a tournament's step is kept only if it won; best_file says
            best = pre[-1]["best_file"]  # which kernel led after each step
        else:
            best = kept[-1]["candidate_file"] if kept else None
        out.append(
            {
                "k": k,
                "candidate_file": best,
                "kept_steps": [st["index"] for st in kept],
                "applied": [st.get("skill_id") or st.get("move") for st in kept],
                "gated": sum(bool(st.get("gated")) for st in pre),
                "steps": len(pre),
            }
        )
    return out


def write_curve(
    out: Path, runs: list[tuple[str, str, int, str]], budget: int, corpus: Path
) -> dict[str, Any]:
    """OUT/curve/LABEL/WORKLOAD/budget-K.cu for every (label, mode, seed, workload) run found under
    OUT/WORKLOAD/LABEL/ (trace.json and start.cu), and the index OUT/curve.json (paths relative to OUT)."""
    entries: list[dict[str, Any]] = []
    done: list[dict[str, Any]] = []
    for label, mode, seed, workload in runs:
        run_dir = out / workload / label
        info: dict[str, Any] = {
            "label": label,
            "mode": mode,
            "seed": seed,
            "workload": workload,
            "run_dir": str(run_dir.relative_to(out)),
        }
        done.append(info)
        trace_path = run_dir / "trace.json"
        if not trace_path.is_file():
            info["status"] = "no trace"
            continue
        trace = json.loads(trace_path.read_text())
        info.update(
            status=trace.get("status"),
            stop_reason=trace.get("stop_reason"),
            gated=trace.get("gated"),
            order=trace.get("order"),
            skills_mode=trace.get("skills_mode"),
        )
        if trace.get("status") not in ("improved", "no_improvement") or not (run_dir / "start.cu").is_file():
            continue  # start kernel rejected, or a run cut short: no curve
        dest = out / "curve" / label / workload
        dest.mkdir(parents=True, exist_ok=True)
        for stale in dest.glob("budget-*.cu"):
            stale.unlink()
        for pt in budget_curve(trace, budget):
            text = (run_dir / (pt["candidate_file"] or "start.cu")).read_text()
            f = dest / f"budget-{pt['k']}.cu"
            f.write_text(text)
            entries.append(
                {
                    "label": label,
                    "mode": mode,
                    "seed": seed,
                    "workload": workload,
                    "k": pt["k"],
                    "file": str(f.relative_to(out)),
                    "sha256": hashlib.sha256(text.encode()).hexdigest()[:16],
                    "from": pt["candidate_file"] or "start.cu",
                    "applied": pt["applied"],
                    "kept_steps": pt["kept_steps"],
                    "gated": pt["gated"],
                }
            )
    index = {
        "budget": budget,
        "corpus": str(corpus),
        "labels": list(dict.fromkeys(r[0] for r in runs)),
        "runs": done,
        "entries": entries,
    }
    (out / "curve.json").write_text(json.dumps(index, indent=1) + "\n")
    return index


def _curve_from(
    index: dict[str, Any], x_of: Callable[[dict[str, Any]], float | None]
) -> tuple[str, dict[str, Any]]:
    """The budget curve's tables (`klineage timings bench`'s format) with x naive of each budget
    point from `x_of(entry)` (None: a point without a time, '-' and n/of in its cell)."""
    from klineage.timing_bench.tables import curve_column, curve_tables, groups_of

    labels: dict[str, dict[str, Any]] = {}
    x: dict[tuple[str, str], float | None] = {}
    for e in index["entries"]:
        labels.setdefault(e["label"], {"label": e["label"], "mode": e["mode"], "seed": e.get("seed")})
        x[(e["workload"], curve_column(e["label"], int(e["k"])))] = x_of(e)
    order = [lb for lb in index.get("labels", []) if lb in labels]
    return curve_tables(
        x,
        groups_of("corpus", sorted({e["workload"] for e in index["entries"]})),
        [labels[lb] for lb in order],
        list(range(1, int(index["budget"]) + 1)),
    )


def measured_curve(
    out: Path, index: dict[str, Any], corpus: Path, measured: MeasuredTimes
) -> tuple[str, dict[str, Any]]:
    """The budget curve from the measured times the judge used: x naive of each budget point is
    the naive kernel's measured time over the point's."""
    naive_of: dict[str, Timing | None] = {}  # per workload, read once

    def x_of(e: dict[str, Any]) -> float | None:
        w = e["workload"]
        if w not in naive_of:
            naive_of[w] = measured.lookup(w, (corpus / w / "naive.cu").read_text())
        naive, point = naive_of[w], measured.lookup(w, (out / e["file"]).read_text())
        return naive.median_ms / point.median_ms if naive and point else None

    return _curve_from(index, x_of)


def timed_curve(out: Path, index: dict[str, Any]) -> tuple[str, dict[str, Any]] | None:
    """The budget curve from the runs' own gate times (a GPU run: trace.json holds the start
    kernel's time and each gated candidate's): x naive of a budget point is the start kernel's
    time over the time of the kernel leading after k candidates. None when no run was timed (a
    CPU run: see `measured_curve`)."""
    traces: dict[Path, dict[str, Any]] = {}
    xs: list[float | None] = []

    def x_of(e: dict[str, Any]) -> float | None:
        run_dir = out / e["workload"] / e["label"]
        if run_dir not in traces:
            traces[run_dir] = json.loads((run_dir / "trace.json").read_text())
        trace = traces[run_dir]
        start = trace.get("start_time_ms")
        times = {st.get("candidate_file"): st.get("time_ms") for st in trace.get("steps") or []}
        point = start if e["from"] == "start.cu" else times.get(e["from"])
        xs.append(start / point if start and point else None)
        return xs[-1]

    curve = _curve_from(index, x_of)
    return curve if any(xs) else None


def write_timed_curve(out: Path, index: dict[str, Any]) -> None:
    """OUT/curve_gpu.md and .json when the runs were timed by their own gate."""
    timed = timed_curve(out, index)
    if timed is None:
        return
    (out / "curve_gpu.md").write_text(timed[0] + "\n")
    (out / "curve_gpu.json").write_text(json.dumps(timed[1], indent=1) + "\n")
    print(f"budget curve from the runs' own GPU times: {out / 'curve_gpu.md'}", file=sys.stderr)


def write_candidates(
    out: Path, runs: list[tuple[str, str, int, str]], measured: MeasuredTimes | None = None
) -> int:
    """OUT/candidates.json, the `materialized_bench.py --extra` index of every start kernel and
    every correct gated candidate of the runs (one file per distinct text per workload) that
    `measured` has no time for: what the next round's --measured needs timed. Returns how many
    files it lists."""
    files: dict[str, dict[str, str]] = {}
    for label, _mode, _seed, workload in runs:
        run_dir = out / workload / label
        trace_path = run_dir / "trace.json"
        if not trace_path.is_file():
            continue
        trace = json.loads(trace_path.read_text())
        names = ["start.cu"] + [
            st["candidate_file"]
            for st in trace.get("steps") or []
            if st.get("accepted") and st.get("candidate_file")
        ]
        for name in names:
            path = run_dir / name
            if not path.is_file():
                continue
            text = path.read_text()
            if measured is None or measured.lookup(workload, text) is None:
                files.setdefault(workload, {}).setdefault(source_hash(text), str(path.relative_to(out)))
    index = {
        "kind": "materializer-candidates",
        "files": {w: sorted(d.values()) for w, d in sorted(files.items())},
    }
    (out / "candidates.json").write_text(json.dumps(index, indent=1) + "\n")
    return sum(len(d) for d in files.values())


def run_one(
    folder: Path,
    skills: list[Skill],
    label: str,
    mode: str,
    seed: int,
    args: argparse.Namespace,
    store: Store,
) -> dict[str, Any]:
    wl = load_workload(folder)
    naive = (folder / "naive.cu").read_text()
    skills_mode, order = MODES[mode]
    t0 = time.perf_counter()
    res = materialize(
        wl,
        naive,
        skills,
        make_provider("offline"),
        args.budget,
        MaterializeOptions(
            backend=args.backend,
            skills_mode=skills_mode,
            order=order,
            seed=seed,
            store=store,
            measured=getattr(args, "measured_times", None),
            explore=mode == "explore",
            tournament=True if getattr(args, "tournament", False) else None,
            out_dir=args.out / folder.name / label,
            gate_options=GateOptions(backend=args.backend, timeout_s=args.timeout),
        ),
    )
    before, after = present(naive), present(res.best_source)
    return {
        "workload": folder.name,
        "mode": mode,
        "label": label,
        "seed": seed,
        "status": res.status,
        "stop_reason": res.stop_reason,
        "skills_available": len(skills) if skills_mode == "all" else 0,
        "gated": res.gated,
        "kept": sum(s.kept for s in res.steps),
        "applied": (res.applied + res.explored) or [s.move for s in res.steps if s.kept],
        "rejected": [f"{s.move}: {s.category}" for s in res.steps if s.verdict == "rejected"],
        "ops_naive": sorted(before),
        "ops_best": sorted(after),
        "ops_added": sorted(after - before),
        "naive_ms": res.start_time_ms,
        "best_ms": res.best_time_ms,
        "torch_ms": res.torch_time_ms,
        "speedup": res.speedup,
        "speedup_vs_torch": res.speedup_vs_torch,
        "start_ok": res.start_gate.get("accepted"),
        "elapsed_s": round(time.perf_counter() - t0, 1),
        "unmeasured": len(res.unmeasured),
        "outpaced": [s.move for s in res.steps if s.verdict == "outpaced"],
        "origins": res.origins,  # gated / kept from skills and from exploration
        "explored": res.explored,
        "run_id": res.run_id,
    }


def table(rows: list[dict[str, Any]], gpu: bool) -> str:
    head = ["workload", "mode", "skills", "gated", "kept", "ops added (best vs naive)"]
    head += ["x naive", "x torch"] if gpu else []
    lines = [" | ".join(head), " | ".join("---" for _ in head)]
    for r in rows:
        cells = [
            r["workload"],
            r.get("label", r["mode"]),
            str(r["skills_available"]),
            str(r["gated"]),
            str(r["kept"]),
            (", ".join(r["ops_added"]) or "-")
            if r["start_ok"]
            else (r["status"] if r["status"].startswith("error") else "start kernel rejected"),
        ]
        if gpu:
            cells += [
                f"{r['speedup']:.2f}" if r["speedup"] else "-",
                f"{r['speedup_vs_torch']:.2f}" if r["speedup_vs_torch"] else "-",
            ]
        lines.append(" | ".join(cells))
    lines.append("")
    for label in dict.fromkeys(r.get("label", r["mode"]) for r in rows):
        rs = [r for r in rows if r.get("label", r["mode"]) == label]
        line = (
            f"{label}: {sum(r['kept'] for r in rs)} steps kept over {len(rs)} workloads, "
            f"{sum(len(r['ops_added']) for r in rs)} optimizations added, {sum(r['gated'] for r in rs)} gated"
        )
        if gpu:
            g, gt = geomean([r["speedup"] for r in rs]), geomean([r["speedup_vs_torch"] for r in rs])
            line += f"; geomean speedup over naive {g:.2f}x" if g else ""
            line += f", vs torch {gt:.2f}x" if gt else ""
        lines.append(line)
    return "\n".join(lines)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--corpus", type=Path, default=ROOT / "expert_kernels")
    ap.add_argument(
        "--db",
        type=Path,
        action="append",
        help="mined skill store; repeat to merge several (default: skills_db/skills.duckdb)",
    )
    ap.add_argument("--mine", action="store_true", help="mine the corpus into --db first (same backend)")
    ap.add_argument("--max-steps", type=int, default=40, help="mining: backward steps per expert kernel")
    ap.add_argument("--backend", choices=("emu", "cuda"), default="emu")
    ap.add_argument("--budget", type=int, default=10)
    ap.add_argument("--seed", type=int, default=0, help="seed of the random order")
    ap.add_argument(
        "--seeds",
        type=int,
        default=None,
        metavar="N",
        help="run the random order with seeds 0..N-1 (labels random-s0, ...) instead of --seed",
    )
    ap.add_argument(
        "--curve-only",
        action="store_true",
        help="gate nothing: rebuild OUT/curve/ and OUT/curve.json from the trace.json files under --out",
    )
    ap.add_argument(
        "--modes", default=",".join(DEFAULT_MODES), help="comma list of curriculum, random, none, explore"
    )
    ap.add_argument("--workloads", default="", help="comma list (default: every folder of the corpus)")
    ap.add_argument("--timeout", type=float, default=300.0, help="seconds per gate stage")
    ap.add_argument("--out", type=Path, default=ROOT / "build" / "materialize_bench")
    ap.add_argument("--jobs", type=int, default=1, help="runs at once (GPU timings still take turns)")
    ap.add_argument("--json", action="store_true", help="print the rows as JSON instead of the table")
    ap.add_argument(
        "--measured",
        type=Path,
        nargs="+",
        metavar="BENCH_JSON",
        help="GPU times of earlier rounds' candidates (materialized_bench.py JSON): the judge's GPU rule "
        "and the tournament of alternatives on a CPU run (materialize/measured.py)",
    )
    ap.add_argument(
        "--tournament",
        action="store_true",
        help="gate alternative skills side by side even without --measured (round 1: they get timed)",
    )
    ap.add_argument(
        "--combine",
        type=Path,
        nargs="+",
        metavar="BENCH_JSON",
        help="only print one table from the bench.json files of earlier runs (e.g. modes run in parallel)",
    )
    args = ap.parse_args()
    if args.combine:
        rows = [r for f in args.combine for r in json.loads(f.read_text())]
        order = {m: i for i, m in enumerate(MODES)}
        rows.sort(key=lambda r: (r["workload"], order.get(r["mode"], 9), r.get("seed") or 0))
        print(table(rows, args.backend == "cuda" or any(r.get("speedup") for r in rows)))
        return 0

    corpus = sorted(p.parent for p in args.corpus.glob("*/naive.cu") if (p.parent / "workload.py").is_file())
    folders = corpus
    if args.workloads:
        wanted = args.workloads.split(",")
        folders = [f for f in folders if f.name in wanted]
    modes = [m for m in args.modes.split(",") if m]
    if not folders or any(m not in MODES for m in modes) or (args.seeds is not None and args.seeds < 1):
        print(
            f"nothing to run (workloads: {[f.name for f in folders]}, modes: {modes}, seeds: {args.seeds})",
            file=sys.stderr,
        )
        return 2
    labels = run_labels(modes, args.seed, args.seeds)
    curve_runs = [(label, mode, seed, f.name) for f in folders for label, mode, seed in labels]
    if args.curve_only:
        index = write_curve(args.out, curve_runs, args.budget, args.corpus)
        write_timed_curve(args.out, index)
        print(
            f"{args.out / 'curve.json'}: {len(index['entries'])} budget points of "
            f"{sum(1 for r in index['runs'] if r.get('status') in ('improved', 'no_improvement'))} runs",
            file=sys.stderr,
        )
        return 0
    args.measured_times = None
    if args.measured:
        try:
            args.measured_times = read_measured(args.measured)
        except KLineageError as e:
            print(f"--measured: {e}", file=sys.stderr)
            return 2
    dbs = args.db or [ROOT / "skills_db" / "skills.duckdb"]
    if args.mine:
        from klineage.mining import mine_corpus

        mine_corpus(
            folders,
            db=dbs[0],
            backend=args.backend,
            max_steps=args.max_steps,
            workers=1,
            roundtrip=False,
            timeout_s=args.timeout,
        )
    skills = load_merged(dbs)
    # every corpus workload's dtypes, not only the selected ones': a skill's scope dtypes are
    # recomputed from its other workloads, and with those unknown it would keep the held-out's own
    dtypes_of = {}
    names = {}
    for f in corpus:
        wl = load_workload(f)
        dtypes_of[wl.name], names[f] = wl.dtypes, wl.name
    args.out.mkdir(parents=True, exist_ok=True)
    # label-major: the two runs in flight are of different workloads more often, so a label's
    # candidates that the previous label gated already come from the gate cache
    runs = [(f, lab) for lab in labels for f in folders]
    partial_lock = threading.Lock()
    (args.out / "rows.jsonl").unlink(missing_ok=True)
    with Store(args.out / "runs.duckdb") as store:
        loo_of = {
            f: leave_one_out(skills, names[f], dtypes_of) for f in folders
        }  # once per workload, not per mode

        def one(f: Path, lab: tuple[str, str, int]) -> dict[str, Any]:
            loo = loo_of[f]
            label, mode, seed = lab
            try:
                row = run_one(f, loo, label, mode, seed, args, store)
            except Exception as e:  # one broken run (a gate or operator bug) must not lose the others
                row = {
                    "workload": f.name,
                    "mode": mode,
                    "label": label,
                    "seed": seed,
                    "status": f"error: {type(e).__name__}: {e}",
                    "stop_reason": "",
                    "skills_available": len(loo),
                    "gated": 0,
                    "kept": 0,
                    "applied": [],
                    "rejected": [],
                    "ops_naive": [],
                    "ops_best": [],
                    "ops_added": [],
                    "start_ok": False,
                    "speedup": None,
                    "speedup_vs_torch": None,
                    "elapsed_s": 0,
                }
            x = (
                f" x{row['speedup']:.2f} naive, x{row['speedup_vs_torch'] or 0:.2f} torch"
                if row["speedup"]
                else ""
            )
            print(
                f"{row['workload']:<20} {label:<11} gated {row['gated']:>2} kept {row['kept']:>2} "
                f"added {','.join(row['ops_added']) or '-'}{x} ({row['elapsed_s']} s)",
                file=sys.stderr,
                flush=True,
            )
            with partial_lock, (args.out / "rows.jsonl").open("a") as fh:  # kept if the run is cut short
                fh.write(json.dumps(row, default=str) + "\n")
            return row

        # --jobs runs at once: builds in parallel, cuda gate children take turns on the GPU (device lock)
        with ThreadPoolExecutor(max_workers=max(1, args.jobs)) as pool:
            rows = list(pool.map(lambda fm: one(*fm), runs))
    order = {lab[0]: i for i, lab in enumerate(labels)}
    rows.sort(key=lambda r: (r["workload"], order[r["label"]]))
    (args.out / "bench.json").write_text(json.dumps(rows, indent=1, default=str) + "\n")
    index = write_curve(args.out, curve_runs, args.budget, args.corpus)
    print(f"budget curve: {len(index['entries'])} points in {args.out / 'curve.json'}", file=sys.stderr)
    write_timed_curve(args.out, index)
    cands = write_candidates(args.out, curve_runs, args.measured_times)
    if args.measured_times is not None:
        text, summary = measured_curve(args.out, index, args.corpus, args.measured_times)
        (args.out / "curve_measured.md").write_text(text + "\n")
        (args.out / "curve_measured.json").write_text(json.dumps(summary, indent=1) + "\n")
        print(f"budget curve from the measured times: {args.out / 'curve_measured.md'}", file=sys.stderr)
        missing = sum(r.get("unmeasured") or 0 for r in rows)
        print(
            f"measured times: {len(args.measured_times)} kernels on {args.measured_times.device}; "
            f"{missing} correct candidates judged without one"
            + (
                " (time OUT/candidates.json and run again)"
                if missing
                else " (every judgement used GPU times)"
            ),
            file=sys.stderr,
        )
    print(
        f"candidates: {cands} distinct correct kernels without a measured time in {args.out / 'candidates.json'}",
        file=sys.stderr,
    )
    if args.json:
        print(json.dumps(rows, indent=1, default=str))
    else:
        print(
            f"\nmaterialize_bench: {len(folders)} workloads, backend {args.backend}, budget {args.budget}, "
            f"skills from {', '.join(map(str, dbs))} ({len(skills)}), leave-one-out\n"
        )
        print(table(rows, args.backend == "cuda"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
