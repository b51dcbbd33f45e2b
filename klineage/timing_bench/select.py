"""Which kernel files `klineage timings bench` times: the suite's (or the given) workload folders,
each one's naive kernel, the --run patterns and --kernel files, the budget points of a --curve index
and the files of an --extra index; one file per distinct text of a workload (a text is built,
checked and timed once however many runs reached it)."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from klineage.timing_bench.options import BenchInputError, BenchOptions
from klineage.timing_bench.tables import curve_column


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


def input_problem(workloads: list[Path], kernels: list[tuple[str, str]]) -> str | None:
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


@dataclass
class Selection:
    """The workloads and the distinct kernel files to time, and how the columns map to them."""

    names: list[str]
    dirs: dict[str, Path]
    #: (label, path pattern with {name} or a file) of each --run and --kernel, in order
    runs: list[tuple[str, str]]
    #: the budget index read by load_curve, when --curve was given
    curve: dict[str, Any] | None = None
    curve_cols: list[str] = field(default_factory=list)
    #: {(name, digest): file} and {(name, column): digest}
    sources: dict[tuple[str, str], Path] = field(default_factory=dict)
    digest: dict[tuple[str, str], str] = field(default_factory=dict)

    def labels(self) -> list[str]:
        return [r[0] for r in self.runs]


def run_columns(opts: BenchOptions) -> list[tuple[str, str]]:
    """(label, pattern) of each --run, then of each --kernel; a bad one is a BenchInputError."""
    runs = [tuple(r.split("=", 1)) for r in opts.runs]
    if any(len(r) != 2 or "{name}" not in r[1] for r in runs):
        raise BenchInputError("--run LABEL=PATTERN needs {name} in the pattern")
    kernels = [
        (k.split("=", 1)[0], k.split("=", 1)[1]) if "=" in k else (Path(k).stem, k) for k in opts.kernels
    ]
    problem = input_problem(list(opts.workloads), kernels)
    if problem:
        raise BenchInputError(problem)
    out = [(r[0], r[1]) for r in runs] + kernels
    if not out and opts.curve is None and opts.extra is None:
        raise BenchInputError(
            "--run LABEL=PATTERN (with {name}) or --kernel FILE, at least once (or --curve / --extra INDEX_JSON)"
        )
    return out


def workload_dirs(opts: BenchOptions) -> tuple[list[str], dict[str, Path]]:
    """The workload names to time (sorted, --only applied) and their folders."""
    suite = opts.suite_dir()  # an unknown suite is bad input with --workload too
    if opts.workloads:
        dirs = {d.resolve().name: d for d in opts.workloads}
    else:
        dirs = {d.name: d for d in suite.iterdir() if (d / "workload.py").is_file()}
    names = sorted(n for n, d in dirs.items() if opts.workloads or (d / "naive.cu").is_file())
    if opts.only:
        names = [n for n in names if n in opts.only.split(",")]
    return names, dirs


def select_kernels(opts: BenchOptions) -> Selection:
    """Every (workload, column) file and one file per distinct text; bad options or index files
    are a BenchInputError naming the option."""
    runs = run_columns(opts)
    names, dirs = workload_dirs(opts)
    sel = Selection(names=names, dirs=dirs, runs=runs)
    if opts.curve is not None:
        try:
            sel.curve = load_curve(
                opts.curve, names, set(filter(None, opts.labels.split(","))) or None, parse_ints(opts.ks)
            )
        except (OSError, ValueError, KeyError) as e:
            raise BenchInputError(f"--curve {opts.curve}: {e}") from None
        sel.names = [n for n in names if any(key[0] == n for key in sel.curve["files"])]
        sel.curve_cols = [curve_column(lb["label"], k) for lb in sel.curve["labels"] for k in sel.curve["ks"]]
    files = _column_files(sel)
    if opts.extra is not None:
        try:
            files.update(load_extra(opts.extra, sel.names))
        except (OSError, ValueError, KeyError, TypeError) as e:
            raise BenchInputError(f"--extra {opts.extra}: {e}") from None
    sel.sources, sel.digest = distinct_sources(files)
    return sel


def _column_files(sel: Selection) -> dict[tuple[str, str], Path]:
    """naive first, then --run / --kernel, then the curve's points, grouped by workload."""
    files = pattern_files(sel.names, [("naive", "{dir}/naive.cu"), *sel.runs], sel.dirs)
    if sel.curve is None:
        return files
    points = sel.curve["files"]
    files.update(
        {(n, col): points[(n, col)] for n in sel.names for col in sel.curve_cols if (n, col) in points}
    )
    return {key: files[key] for n in sel.names for key in files if key[0] == n}
