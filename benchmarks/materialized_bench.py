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

Budget curve (`--curve OUT/curve.json`, written by benchmarks/materialize_bench.py): the best
kernel of every (label, workload) run after its first k gated candidates, k = 1..budget. Each
distinct text is built, checked and timed once (the texts repeat a lot: a run that has stopped,
or two orders that reached the same kernel). The tables give, per k, the geometric mean over the
workloads of the speedup over naive for the curriculum, the random order (the geometric mean of
the per-seed geometric means, and the smallest and largest of those) and no skills, for the
memory-bound and the compute-bound corpus workloads apart (klineage.corpus), then one row per
(workload, label). `--ks` and `--labels` time a subset. A kernel whose first launch takes over
200 ms (reduce_sum's one-thread kernels: about 7.3 s on the H200) is timed by that one launch.

    python3 benchmarks/materialized_bench.py --suite corpus --curve .gpu/curve/curve.json --budget-s 0.2 --out "$OUT"

Any workload folder and kernel files, instead of a suite of this repository:

    python3 benchmarks/materialized_bench.py --workload DIR --kernel mine=my.cu --kernel other.cu --out "$OUT"

`--workload` (repeatable) replaces the suite's folders; `--kernel [LABEL=]FILE` (repeatable, one
--workload) times those files beside its naive.cu (when it has one). Without a CUDA GPU the script
says so in one line and exits 2.
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
NOT_TIMED = "not timed (deadline)"


def geomean(xs: list[float | None]) -> float | None:
    ys = [x for x in xs if x and x > 0]
    return math.exp(sum(map(math.log, ys)) / len(ys)) if ys else None


def curve_column(label: str, k: int) -> str:
    """The column of one budget point among the kernels of a workload (next to naive and the --run labels)."""
    return f"{label}@{k}"


def parse_ints(text: str) -> set[int] | None:
    return {int(x) for x in text.split(",") if x.strip()} if text else None


def load_curve(
    index_path: Path, names: list[str], labels: set[str] | None = None, ks: set[int] | None = None
) -> dict[str, Any]:
    """The budget index of materialize_bench.py, restricted to `names` (and `labels`, `ks` when
    given): {"budget", "labels": [{"label", "mode", "seed"}], "ks": [...], "files": {(name, column): Path}}.
    Paths in the index are relative to its folder; a missing file is an error (a broken carry)."""
    index = json.loads(index_path.read_text())
    base = index_path.parent
    budget = int(index["budget"])
    meta: dict[str, dict[str, Any]] = {}
    files: dict[tuple[str, str], Path] = {}
    for e in index["entries"]:
        if e["workload"] not in names or (labels and e["label"] not in labels) or (ks and e["k"] not in ks):
            continue
        meta.setdefault(e["label"], {"label": e["label"], "mode": e["mode"], "seed": e.get("seed")})
        path = base / e["file"]
        if not path.is_file():
            raise FileNotFoundError(f"{index_path}: {e['file']} is missing")
        files[(e["workload"], curve_column(e["label"], int(e["k"])))] = path
    order = [lb for lb in index.get("labels", []) if lb in meta] + [
        lb for lb in meta if lb not in index.get("labels", [])
    ]
    return {
        "budget": budget,
        "labels": [meta[lb] for lb in order],
        "ks": sorted(ks & set(range(1, budget + 1))) if ks else list(range(1, budget + 1)),
        "files": files,
    }


def load_extra(index_path: Path, names: list[str]) -> dict[tuple[str, str], Path]:
    """{(workload, 'extra:REL'): path} for the files of an index {"files": {workload: [REL, ...]}}, paths
    relative to its folder, workloads outside `names` left out; a missing file is an error (a broken carry)."""
    index = json.loads(index_path.read_text())
    out: dict[tuple[str, str], Path] = {}
    for name, rels in index["files"].items():
        if name not in names:
            continue
        for rel in rels:
            path = index_path.parent / rel
            if not path.is_file():
                raise FileNotFoundError(f"{rel} is missing")
            out[(name, f"extra:{rel}")] = path
    return out


def pattern_files(
    names: list[str], columns: list[tuple[str, str]], dirs: dict[str, Path] | None = None
) -> dict[tuple[str, str], Path]:
    """{(name, column): file} for (column, path pattern with {name}, or {dir}: the workload's folder);
    a missing file leaves the pair out."""
    out = {}
    for n in names:
        for col, pattern in columns:
            path = Path(pattern.format(name=n, dir=(dirs or {}).get(n, n)))
            if path.is_file():
                out[(n, col)] = path
    return out


def distinct_sources(
    files: dict[tuple[str, str], Path],
) -> tuple[dict[tuple[str, str], Path], dict[tuple[str, str], str]]:
    """One file per distinct text of each workload, the first met: ({(name, digest): path},
    {(name, column): digest})."""
    sources: dict[tuple[str, str], Path] = {}
    digest: dict[tuple[str, str], str] = {}
    for (n, col), path in files.items():
        h = hashlib.sha256(path.read_bytes()).hexdigest()[:16]
        digest[(n, col)] = h
        sources.setdefault((n, h), path)
    return sources, digest


def speedups(
    names: list[str],
    columns: list[str],
    digest: dict[tuple[str, str], str],
    timed: dict[tuple[str, str], dict[str, Any]],
) -> dict[tuple[str, str], float | None]:
    """x naive per (name, column): naive's time over the column's, None where either is missing or not ok."""
    out: dict[tuple[str, str], float | None] = {}
    for n in names:
        naive = timed.get((n, digest.get((n, "naive"), "")), {})
        for col in columns:
            k = timed.get((n, digest.get((n, col), "")), {})
            ok = naive.get("check") == "ok" and k.get("check") == "ok" and naive.get("ms") and k.get("ms")
            out[(n, col)] = naive["ms"] / k["ms"] if ok else None
    return out


def curve_summary(
    x: dict[tuple[str, str], float | None], names: list[str], labels: list[dict[str, Any]], ks: list[int]
) -> list[dict[str, Any]]:
    """Per k: per mode, the geomean over `names` of x naive (random: per seed, then the geomean,
    min and max of the seeds' geomeans) and `n`, how many (workload, seed) pairs had a timed kernel."""
    out = []
    for k in ks:
        point: dict[str, Any] = {"k": k}
        for mode in dict.fromkeys(lb["mode"] for lb in labels):
            per_label = []
            for lb in (lb for lb in labels if lb["mode"] == mode):
                xs = [x.get((n, curve_column(lb["label"], k))) for n in names]
                per_label.append({"label": lb["label"], "geomean": geomean(xs), "n": sum(1 for v in xs if v)})
            gs = [p["geomean"] for p in per_label if p["geomean"]]
            point[mode] = {
                "geomean": geomean(gs),
                "min": min(gs) if gs else None,
                "max": max(gs) if gs else None,
                "n": sum(p["n"] for p in per_label),
                "labels": per_label,
            }
        out.append(point)
    return out


def curve_tables(
    x: dict[tuple[str, str], float | None],
    groups: dict[str, list[str]],
    labels: list[dict[str, Any]],
    ks: list[int],
) -> tuple[str, dict[str, Any]]:
    """Markdown: one budget table per group of workloads, then x naive per (workload, label) and k."""
    modes = list(dict.fromkeys(lb["mode"] for lb in labels))
    seeds = {m: sum(1 for lb in labels if lb["mode"] == m) for m in modes}

    def cell(v: float | None, n: int, of: int) -> str:
        return ("-" if v is None else f"{v:.2f}") + ("" if n == of else f" ({n}/{of})")

    lines: list[str] = []
    summary: dict[str, Any] = {}
    for group, members in groups.items():
        if not members:
            continue
        rows = curve_summary(x, members, labels, ks)
        summary[group] = rows
        head = ["k"]
        for m in modes:
            head += [f"{m} (geomean of {seeds[m]} seeds)", f"{m} min", f"{m} max"] if seeds[m] > 1 else [m]
        lines += [
            f"{group} ({len(members)}: {', '.join(members)}): geomean x naive after k gated candidates",
            "",
            "| " + " | ".join(head) + " |",
            "|" + "---:|" * len(head),
        ]
        for r in rows:
            cells = [str(r["k"])]
            for m in modes:
                d, of = r[m], len(members) * seeds[m]
                cells.append(cell(d["geomean"], d["n"], of))
                if seeds[m] > 1:
                    cells += [cell(d["min"], d["n"], of), cell(d["max"], d["n"], of)]
            lines.append("| " + " | ".join(cells) + " |")
        lines.append("")
    names = [n for members in groups.values() for n in members]
    names = list(dict.fromkeys(names))
    lines += [
        "x naive per workload and label after k gated candidates",
        "",
        "| workload | label | " + " | ".join(f"k={k}" for k in ks) + " |",
        "|---|---|" + "---:|" * len(ks),
    ]
    for n in names:
        for lb in labels:
            vals = [x.get((n, curve_column(lb["label"], k))) for k in ks]
            lines.append(
                f"| {n} | {lb['label']} | " + " | ".join(f"{v:.2f}" if v else "-" for v in vals) + " |"
            )
    return "\n".join(lines), summary


def groups_of(suite: str, names: list[str]) -> dict[str, list[str]]:
    """The corpus apart by family (memory-bound, compute-bound, anything else); held-out: one group."""
    if suite != "corpus":
        return {"all": names}
    from klineage.corpus import COMPUTE_BOUND, MEMORY_BOUND

    return {
        "memory-bound": [n for n in names if n in MEMORY_BOUND],
        "compute-bound": [n for n in names if n in COMPUTE_BOUND],
        "other": [n for n in names if n not in MEMORY_BOUND and n not in COMPUTE_BOUND],
    }


def _input_problem(workloads: list[Path], kernels: list[tuple[str, str]]) -> str | None:
    """One line naming the first bad --workload or --kernel, or None."""
    for d in workloads:
        if not (d / "workload.py").is_file():
            return f"--workload {d}: no workload.py in that folder"
    if kernels and len(workloads) != 1:
        return "--kernel needs exactly one --workload (the workload the kernel files implement)"
    for label, path in kernels:
        if not label or not Path(path).is_file():
            return f"--kernel {label}={path}: no such file" if label else f"--kernel ={path}: empty label"
    return None


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--suite", choices=sorted(SUITES), default="heldout")
    p.add_argument(
        "--workload",
        action="append",
        default=[],
        type=Path,
        metavar="DIR",
        help="a workload folder anywhere (repeatable): replaces the suite's folders",
    )
    p.add_argument(
        "--kernel",
        action="append",
        default=[],
        metavar="[LABEL=]FILE",
        help="a kernel file to time for the one --workload (repeatable; LABEL defaults to the file's stem)",
    )
    p.add_argument(
        "--only", default="", help="comma-separated workloads (default: every folder with naive.cu)"
    )
    p.add_argument(
        "--run",
        action="append",
        default=[],
        metavar="LABEL=PATTERN",
        help="a materializer run: LABEL and a path pattern with {name}",
    )
    p.add_argument(
        "--curve",
        type=Path,
        default=None,
        metavar="INDEX_JSON",
        help="the budget index of materialize_bench.py (OUT/curve.json): time every budget point",
    )
    p.add_argument(
        "--extra",
        type=Path,
        default=None,
        metavar="INDEX_JSON",
        help="more kernels to check and time, in no table: {'files': {workload: [paths relative to the "
        "index]}} (`klineage timings export`; `klineage timings import` reads the JSON back)",
    )
    p.add_argument("--labels", default="", help="with --curve: comma list of labels to time (default: all)")
    p.add_argument(
        "--ks", default="", help="with --curve: comma list of budgets to time (default: 1..budget)"
    )
    p.add_argument("--budget-s", type=float, default=1.0, help="timing budget per kernel / torch call")
    p.add_argument("--out", default="", help="folder for materialized_bench.log and .json")
    p.add_argument("--dry-run", action="store_true", help="list the distinct kernels per workload and stop")
    p.add_argument(
        "--deadline-s",
        type=float,
        default=None,
        help="after this many seconds from the start, time nothing more (those kernels: 'not timed'); "
        "the tables are still printed",
    )
    args = p.parse_args(argv)
    t_start = time.perf_counter()
    runs = [tuple(r.split("=", 1)) for r in args.run]
    if any(len(r) != 2 or "{name}" not in r[1] for r in runs):
        print("--run LABEL=PATTERN needs {name} in the pattern", file=sys.stderr)
        return 2
    kernels = [
        (k.split("=", 1)[0], k.split("=", 1)[1]) if "=" in k else (Path(k).stem, k) for k in args.kernel
    ]
    problem = _input_problem(args.workload, kernels)
    if problem:
        print(problem, file=sys.stderr)
        return 2
    runs += kernels
    if not runs and args.curve is None and args.extra is None:
        print(
            "--run LABEL=PATTERN (with {name}) or --kernel FILE, at least once (or --curve / --extra INDEX_JSON)",
            file=sys.stderr,
        )
        return 2
    if args.workload:
        dirs = {d.resolve().name: d for d in args.workload}
    else:
        dirs = {d.name: d for d in SUITES[args.suite].iterdir() if (d / "workload.py").is_file()}
    names = sorted(n for n, d in dirs.items() if args.workload or (d / "naive.cu").is_file())
    if args.only:
        names = [n for n in names if n in args.only.split(",")]
    curve: dict[str, Any] | None = None
    curve_cols: list[str] = []
    columns = [("naive", "{dir}/naive.cu"), *runs]
    if args.curve is not None:
        try:
            curve = load_curve(
                args.curve, names, set(filter(None, args.labels.split(","))) or None, parse_ints(args.ks)
            )
        except (OSError, ValueError, KeyError) as e:
            print(f"--curve {args.curve}: {e}", file=sys.stderr)
            return 2
        names = [n for n in names if any(key[0] == n for key in curve["files"])]
        curve_cols = [curve_column(lb["label"], k) for lb in curve["labels"] for k in curve["ks"]]
    out = Path(args.out) if args.out else None
    if out:
        out.mkdir(parents=True, exist_ok=True)

    # one build per distinct source: (workload, column) -> digest; naive first, then --run, then the curve
    files = pattern_files(names, columns, dirs)
    if curve is not None:
        files.update(
            {
                (n, col): curve["files"][(n, col)]
                for n in names
                for col in curve_cols
                if (n, col) in curve["files"]
            }
        )
        files = {key: files[key] for n in names for key in files if key[0] == n}
    if args.extra is not None:
        try:
            files.update(load_extra(args.extra, names))
        except (OSError, ValueError, KeyError, TypeError) as e:
            print(f"--extra {args.extra}: {e}", file=sys.stderr)
            return 2
    sources, digest = distinct_sources(files)
    if args.dry_run:
        for n in names:
            per_run = {lb: digest.get((n, lb), "-") for lb in ["naive", *(r[0] for r in runs)]}
            print(n, len({h for (m, h) in sources if m == n}), per_run)
        print(f"{len(sources)} distinct kernels over {len(names)} workloads")
        return 0
    import torch

    if not torch.cuda.is_available():
        print(
            "materialized_bench.py: no CUDA GPU visible here: it builds and times kernels on a GPU "
            "(use --dry-run to list them)",
            file=sys.stderr,
        )
        return 2
    sink = open(out / "materialized_bench.log", "w") if out else None  # noqa: SIM115
    import corpus_bench as cb

    from klineage import load_workload
    from klineage.gates.cuda.runner import CudaRunner
    from klineage.gates.cuda.timing import Bench, timed
    from klineage.gates.protocol import check_workload

    def past_deadline() -> bool:
        return args.deadline_s is not None and time.perf_counter() - t_start > args.deadline_s

    t0 = time.perf_counter()
    built = cb.build_all(
        [(n, h, path) for (n, h), path in sources.items()],
        Path(tempfile.mkdtemp(prefix="materialized_bench_")),
    )
    cb.log(
        f"built {len(sources)} distinct kernels of {len(names)} workloads in {time.perf_counter() - t0:.1f} s",
        sink,
    )
    device = torch.device("cuda", torch.cuda.current_device())
    dev = torch.cuda.get_device_name(device)
    cb.log(f"device {dev}; torch {torch.__version__}", sink)
    rows: list[dict[str, Any]] = []
    for n in names:
        row: dict[str, Any] = {"name": n, "kernels": {}}
        rows.append(row)
        t_n = time.perf_counter()
        keys = [key for key in sources if key[0] == n]
        if past_deadline():  # not even the workload's inputs
            row["kernels"] = {h: {"check": NOT_TIMED} for _, h in keys}
        else:
            try:
                wl = load_workload(dirs[n])
                bindings = wl.shape_set("bench")[0]
                row["bench"] = bindings
                bench = Bench(wl, bindings, device)
                stream = torch.cuda.current_stream(device)
                for key in keys:
                    b = built[key]
                    k: dict[str, Any] = {}
                    t_k = time.perf_counter()
                    row["kernels"][key[1]] = k
                    if past_deadline():
                        k["check"] = NOT_TIMED
                        continue
                    if not b.ok:
                        k["check"] = f"build failed: {b.message[:300]}"
                        continue
                    runner = CudaRunner(b.library, wl, device)
                    v = check_workload(wl, runner, "test", seeds=(0, 1))
                    k["check"] = v.category if v.ok else f"{v.category}: {v.message[:300]}"
                    if v.ok:
                        s, reps, trials = cb.time_variant(runner, bench, stream, args.budget_s, slow_ok=True)
                        k["ms"], k["timed"] = s.median_ms, f"{trials}x{reps}"
                        # the spread the materializer's judge needs (materialize/measured.py)
                        k["trial_ms"], k["min_ms"], k["max_ms"] = s.trial_medians_ms, s.min_ms, s.max_ms
                    k["wall_s"] = round(time.perf_counter() - t_k, 2)
                if not past_deadline():
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
        bad = sum(1 for k in row["kernels"].values() if k.get("check") != "ok")
        cb.log(
            f"{n}: naive {naive_ms or 0:.4f} ms, torch {row.get('torch_ms') or 0:.4f} ms; "
            f"{len(row['kernels'])} distinct kernels ({bad} not ok) in {time.perf_counter() - t_n:.1f} s"
            + "".join(f", {lb} {row[lb].get('ms') or 0:.4f} ms ({row[lb].get('check')})" for lb, _ in runs),
            sink,
        )
        if out:  # what was timed survives a run cut short
            (out / "materialized_bench.partial.json").write_text(json.dumps(rows, indent=1, default=str))
    stamp = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    header = (
        f"{stamp}; {dev}; torch {torch.__version__}; suite {args.suite}; budget {args.budget_s} s per kernel"
    )
    labels = [r[0] for r in runs]
    lines = [header]
    if labels:
        lines += run_table(rows, labels, groups_of(args.suite, names))
    doc: dict[str, Any] = {
        "date": stamp,
        "device": dev,
        "torch": torch.__version__,
        "suite": args.suite,
        "runs": dict(runs),
        "rows": rows,
    }
    failed = [
        (r["name"], lb)
        for r in rows
        for lb in labels
        if r[lb].get("check") not in ("ok", "no kernel", NOT_TIMED)
    ]
    if curve is not None:
        x = speedups(names, curve_cols, digest, timed_by_digest(rows))
        text, summary = curve_tables(x, groups_of(args.suite, names), curve["labels"], curve["ks"])
        lines += ["", text]
        doc["curve"] = {
            "index": str(args.curve),
            "labels": curve["labels"],
            "ks": curve["ks"],
            "summary": summary,
            "x_naive": {f"{n}|{col}": v for (n, col), v in x.items()},
        }
        failed += [
            (n, col)
            for n in names
            for col in curve_cols
            if (n, col) in digest
            and timed_by_digest(rows).get((n, digest[(n, col)]), {}).get("check") not in ("ok", NOT_TIMED)
        ]
    if failed:
        lines.append(f"\nnot ok: {', '.join(f'{n} {col}' for n, col in failed)}")
    late = [(r["name"], h) for r in rows for h, k in r["kernels"].items() if k.get("check") == NOT_TIMED]
    if late:
        lines.append(
            f"\n{len(late)} kernels not timed (--deadline-s {args.deadline_s:g} passed): "
            + ", ".join(sorted({n for n, _ in late}))
        )
    lines.append(f"\nwall {time.perf_counter() - t_start:.0f} s")
    cb.log("\n".join(lines), sink)
    if out:
        (out / "materialized_bench.json").write_text(json.dumps(doc, indent=1, default=str))
    if sink:
        sink.close()
    return 0 if not failed else 1


def timed_by_digest(rows: list[dict[str, Any]]) -> dict[tuple[str, str], dict[str, Any]]:
    """{(name, digest): the kernel's check and time} from the rows."""
    return {(r["name"], h): k for r in rows for h, k in r["kernels"].items()}


def run_table(rows: list[dict[str, Any]], labels: list[str], groups: dict[str, list[str]]) -> list[str]:
    """The --run table: per workload, naive, torch and each run's time and speedups; then per run
    and group of workloads the geometric means."""
    lines = [
        "| workload | bench shape | naive ms | torch ms | "
        + " | ".join(f"{lb} ms | x naive | x torch" for lb in labels)
        + " |",
        "|---|---|---|---|" + "---|---|---|" * len(labels),
    ]
    for r in rows:
        shape = "x".join(str(v) for v in (r.get("bench") or {}).values())
        cells = [r["name"], shape, f"{r['naive'].get('ms') or 0:.4f}", f"{r.get('torch_ms') or 0:.4f}"]
        for lb in labels:
            k = r[lb]
            ok = k.get("check") == "ok"
            cells += [
                f"{k['ms']:.4f}" if ok else k.get("check", "")[:40],
                f"{k['x_naive']:.2f}" if ok and k.get("x_naive") else "-",
                f"{k['x_torch']:.2f}" if ok and k.get("x_torch") else "-",
            ]
        lines.append("| " + " | ".join(cells) + " |")
    lines.append("")
    for group, members in groups.items():
        rs = [r for r in rows if r["name"] in members]
        if not rs:
            continue
        for lb in labels:
            xs = [r[lb].get("x_naive") for r in rs if r[lb].get("check") == "ok"]
            ts = [r[lb].get("x_torch") for r in rs if r[lb].get("check") == "ok"]
            bad = [r["name"] for r in rs if r[lb].get("check") not in ("ok", "no kernel")]
            g, gt = geomean(xs), geomean(ts)
            lines.append(
                f"{group} ({len(rs)}), {lb}: {len(xs)} kernels checked ok, geomean x naive {g or 0:.2f}, "
                f"x torch {gt or 0:.2f}; {sum(1 for x in xs if x and x > 1.1)} over 1.1x naive; "
                f"failed: {', '.join(bad) or 'none'}"
            )
    return lines


if __name__ == "__main__":
    sys.exit(main())
