"""The gate's speed and its verdicts through both run paths: the device's resident worker
(gates/resident.py) and a child process per candidate (KLINEAGE_GATE_WORKER=child).

    source benchmarks/gpu_env.sh && python3 benchmarks/gate_bench.py --out "$OUT/gate_bench"   # on the H200

Phases, each written to OUT/gate_bench.json as it ends (a run cut short keeps what it measured):
  adversarial  the rows of benchmarks/kernels/gpu_check (gpu_gate_check.py's cases, their options
               included) through both paths: the categories must be identical
  interleave   faulting (illegal address) and honest kernels in turn through the resident worker:
               every honest kernel after a fault is accepted, each fault is its own `crash`
  throughput   lineage states of the corpus (every expert kernel, its naive kernel, and every
               one-step simplification the operators make of the expert: the walker's first
               frontier) gated with --jobs threads: candidates per minute and per-candidate
               seconds, cold (the first, worker start included) and warm, per stage (nvcc
               cubin, library build, GPU run); the resident path over --limit candidates, the
               child path over the first --child-limit of them; then the same candidates again
               as cache hits (--child-limit 0: the resident path alone; --prewarm gates each
               workload's first candidate before a --window-s window, uncounted)
  slow         the naive kernel of each --slow workload (the materializer's slow start kernels:
               23-346 ms a launch on the H200) gated once through the resident worker: seconds of
               GPU run and the timing rule each got (gates/cuda/stats.plan_timing)
The short table is printed last; `--backend emu` runs every phase on the CPU (no timing) for a
dry run of the harness.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from klineage.gates import gate as gate_mod  # noqa: E402
from klineage.gates import resident  # noqa: E402
from klineage.gates.backend import GateOptions  # noqa: E402
from klineage.gates.backends import get_backend  # noqa: E402

PATHS = ("resident", "child")


# ---- candidates ---------------------------------------------------------------------------------


def corpus_states(corpus: Path) -> list[tuple[str, str, Path]]:
    """(label, source, workload folder): per workload the naive and expert kernels and every
    one-step simplification of the expert, interleaved across workloads (so a prefix spans them)."""
    from klineage.deopt.registry import operators
    from klineage.source.model import CudaSource

    per: list[list[tuple[str, str, Path]]] = []
    for wl in sorted(p.parent for p in corpus.glob("*/workload.py")):
        if not (wl / "expert.cu").is_file():
            continue
        expert = (wl / "expert.cu").read_text()
        rows = [(f"{wl.name}/expert", expert, wl)]
        if (wl / "naive.cu").is_file():
            rows.append((f"{wl.name}/naive", (wl / "naive.cu").read_text(), wl))
        seen = {r[1] for r in rows}
        src = CudaSource.from_text(expert, "expert.cu")
        for op in operators():
            try:
                sites = op.find(src)
            except Exception:  # noqa: BLE001 - an operator that cannot read this kernel offers nothing
                continue
            for i, site in enumerate(sites):
                try:
                    text = op.remove(src, site).text
                except Exception:  # noqa: BLE001 - refused removals are not candidates
                    continue
                if text not in seen:
                    seen.add(text)
                    rows.append((f"{wl.name}/-{op.name}#{i}", text, wl))
        per.append(rows)
    out: list[tuple[str, str, Path]] = []
    for i in range(max((len(r) for r in per), default=0)):
        out += [rows[i] for rows in per if i < len(rows)]
    return out


# ---- stage instrumentation ------------------------------------------------------------------------


class Stages:
    """Seconds per stage of every gate, keyed by the gate's staging folder (compile, build and run
    each get a sub-folder of it), read off wrappers around the gate module's stage functions."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.by_dir: dict[str, dict[str, float]] = {}

    def _note(self, workdir: Path, stage: str, seconds: float) -> None:
        with self.lock:
            self.by_dir.setdefault(str(Path(workdir).parent), {})[stage] = seconds

    def wrap(self, stage: str, fn: Callable[..., Any], workdir_arg: int) -> Callable[..., Any]:
        def timed(*a: Any, **kw: Any) -> Any:
            t0 = time.perf_counter()
            out = None
            try:
                out = fn(*a, **kw)
                return out
            finally:
                self._note(a[workdir_arg], stage, time.perf_counter() - t0)
                if hasattr(out, "via"):  # the run stage: where the candidate ran
                    with self.lock:
                        self.by_dir[str(Path(a[workdir_arg]).parent)]["via"] = out.via

        return timed

    def install(self, backend_name: str) -> None:
        gate_mod.compile_cubin = self.wrap("nvcc_cubin_s", gate_mod.compile_cubin, 1)
        gate_mod.run_worker = self.wrap("run_s", gate_mod.run_worker, 1)
        backend = get_backend(backend_name)
        backend.build = self.wrap("build_s", backend.build, 1)

    def of(self, artifact_id: str, root: Path) -> dict[str, float]:
        with self.lock:
            for d, st in self.by_dir.items():
                if d.startswith(str(root)) and f".staging-{artifact_id}" in d:
                    return st
        return {}


STAGES = Stages()


def gate_one(
    label: str, text: str, folder: Path, options: GateOptions, root: Path, use_cache: bool = False
) -> dict[str, Any]:
    t0 = time.perf_counter()
    try:
        r = gate_mod.gate(
            text,
            folder if use_cache else _workload(folder),
            options,
            name=f"{label}.cu",
            use_cache=use_cache,
            cache_root=root,
        )
        d = r.to_dict()
    except Exception as e:  # noqa: BLE001 - one broken row must not hide the others
        r, d = None, {"category": "harness_error", "message": f"{type(e).__name__}: {e}", "accepted": False}
    d["wall_s"] = round(time.perf_counter() - t0, 3)
    d["label"] = label
    if r is not None:
        d["stages"] = STAGES.of(r.artifact_id, root) if r.artifact_id else {}
        d["phases"] = worker_phases(root, r.artifact_id, d)
    return d


def worker_phases(root: Path, artifact_id: str, d: dict[str, Any]) -> dict[str, float]:
    """Seconds per phase inside the worker (gates/worker.py and the profile stage), read from
    the run folder's result.json."""
    out: dict[str, float] = {}
    for f in root.glob(f"*/{artifact_id}*/run/result.json") if artifact_id else []:
        try:
            out.update(json.loads(f.read_text()).get("phases") or {})
        except (OSError, ValueError):
            pass
    out.update(((d.get("timing") or {}).get("extra") or {}).get("phases_s") or {})
    return out


_wl_lock = threading.Lock()
_wl: dict[Path, Any] = {}


def _workload(folder: Path) -> Any:
    from klineage.workload import load_workload

    with _wl_lock:
        if folder not in _wl:
            _wl[folder] = load_workload(folder)
        return _wl[folder]


def use_path(path: str) -> None:
    os.environ["KLINEAGE_GATE_WORKER"] = path


# ---- phases -------------------------------------------------------------------------------------


def verdict_of(d: dict[str, Any]) -> dict[str, Any]:
    """What must not depend on the path: acceptance, stage, category and, for a rejection, the message."""
    return {
        "accepted": d.get("accepted"),
        "stage": d.get("stage"),
        "category": d.get("category"),
        "message": None if d.get("accepted") else d.get("message"),
    }


def adversarial(backend: str, root: Path, jobs: int) -> list[dict[str, Any]]:
    """Every row through one path, then the other (rows side by side: builds overlap, GPU runs
    take turns on the device lock)."""
    from gpu_gate_check import adversarial_cases

    cases = adversarial_cases()
    rows: list[dict[str, Any]] = [{"case": c.label, "expect": list(c.expect)} for c in cases]
    for path in PATHS:
        use_path(path)

        def one(i: int, path: str = path) -> None:
            case = cases[i]
            opts = {"backend": backend, "timeout_s": 180.0, **case.options}
            options = GateOptions(**opts, extra=dict(case.extra))
            d = gate_one(case.label, case.kernel.read_text(), case.workload, options, root / path / str(i))
            rows[i][path] = {
                "category": d.get("category"),
                "wall_s": d["wall_s"],
                "verdict": verdict_of(d),
                "message": str(d.get("message", ""))[:200],
            }
            print(f"adversarial {path}: {case.label}: {d.get('category')} ({d['wall_s']} s)", flush=True)

        with ThreadPoolExecutor(max(1, jobs)) as pool:
            list(pool.map(one, range(len(cases))))
    for r, case in zip(rows, cases, strict=True):
        r["same"] = r["resident"]["category"] == r["child"]["category"]
        r["expected"] = r["resident"]["category"] in case.expect
    return rows


def interleave(backend: str, root: Path, rounds: int = 3) -> dict[str, Any]:
    check = ROOT / "benchmarks" / "kernels" / "gpu_check"
    honest, crash = (check / "honest.cu").read_text(), (check / "crash.cu").read_text()
    use_path("resident")
    before = len(resident.STATS.retired)
    seq = []
    for i in range(rounds):
        # each text made unique so no verdict comes from the cache
        seq.append((f"honest{i}", honest + f"\n// {i}\n", "ok"))
        seq.append((f"crash{i}", crash + f"\n// {i}\n", "crash"))
    seq.append(("honest-last", honest + "\n// last\n", "ok"))
    options = GateOptions(backend=backend, timeout_s=120.0)
    got = [gate_one(label, text, check, options, root / "interleave") for label, text, _ in seq]
    rows = [
        {"label": label, "want": want, "got": d.get("category"), "wall_s": d["wall_s"]}
        for (label, _, want), d in zip(seq, got, strict=True)
    ]
    return {
        "rows": rows,
        "all_as_expected": all(r["want"] == r["got"] for r in rows),
        "workers_retired": resident.STATS.retired[before:],
    }


def slow_kernels(backend: str, corpus: Path, names: list[str], root: Path) -> list[dict[str, Any]]:
    """Each workload's naive kernel once through the resident worker, uncached."""
    use_path("resident")
    options = GateOptions(backend=backend, timeout_s=120.0)
    rows = []
    for name in names:
        folder = corpus / name
        if not (folder / "naive.cu").is_file():
            continue
        d = gate_one(f"{name}/naive", (folder / "naive.cu").read_text(), folder, options, root)
        t = d.get("timing") or {}
        extra = t.get("extra") or {}
        rows.append(
            {
                "label": d["label"],
                "category": d.get("category"),
                "wall_s": d["wall_s"],
                "run_s": round(d.get("stages", {}).get("run_s") or 0.0, 3),
                "median_ms": t.get("median_ms"),
                "estimate_ms": extra.get("estimate_ms"),
                "rule": extra.get("timing_rule"),
                "trials_x_reps": f"{t.get('trials')}x{t.get('reps_per_trial')}",
                "profile_s": extra.get("profile_s"),
            }
        )
        print(f"slow: {rows[-1]}", flush=True)
    return rows


def summarize(rows: list[dict[str, Any]], wall: float) -> dict[str, Any]:
    def med(key: str) -> float | None:
        xs = [r["stages"][key] for r in rows if r.get("stages", {}).get(key) is not None]
        return round(statistics.median(xs), 3) if xs else None

    walls = [r["wall_s"] for r in rows]
    return {
        "candidates": len(rows),
        "wall_s": round(wall, 2),
        "per_minute": round(60.0 * len(rows) / wall, 1) if wall > 0 else None,
        "amortized_s": round(wall / len(rows), 3) if rows else None,
        "median_candidate_s": round(statistics.median(walls), 3) if walls else None,
        "median_stage_s": {k: med(k) for k in ("nvcc_cubin_s", "build_s", "run_s")},
        "median_profile_s": _median(
            [(r.get("timing") or {}).get("extra", {}).get("profile_s") for r in rows]
        ),
        "median_phase_s": {
            k: _median([r.get("phases", {}).get(k) for r in rows])
            for k in (
                "load_s",
                "correctness_s",
                "profile_s",
                "bench_setup_s",
                "timing_s",
                "verify_s",
                "cupti_s",
                "reference_s",
            )
        },
        "categories": dict(Counter(r.get("category") for r in rows)),
        "timing_rules": dict(
            Counter(((r.get("timing") or {}).get("extra") or {}).get("timing_rule") for r in rows)
        ),
        "ran_via": dict(Counter(r.get("stages", {}).get("via") for r in rows)),
    }


def _median(xs: list[Any]) -> float | None:
    vals = [x for x in xs if isinstance(x, int | float)]
    return round(statistics.median(vals), 3) if vals else None


def throughput(
    path: str,
    cands: list[tuple[str, str, Path]],
    backend: str,
    jobs: int,
    root: Path,
    deadline: float,
    prewarm: bool = False,
    window_s: float = 0.0,
) -> dict[str, Any]:
    """Cold (the first candidate), then warm: the rest with `jobs` threads until the deadline (or
    `window_s` after the warm window opens). With `prewarm`, the first candidate of every other
    workload is gated before the window opens and not counted: the window then measures a
    worker that has met every workload (its input sets kept), as a materializer's loop does."""
    use_path(path)
    resident.shutdown()
    resident.STATS.__init__()
    options = GateOptions(backend=backend, timeout_s=120.0)
    t0 = time.perf_counter()
    first = gate_one(*cands[0], options, root)  # cold: worker start (resident) included
    cold_wall = time.perf_counter() - t0
    rest = cands[1:]
    warmed: dict[str, Any] = {}
    if prewarm:
        seen = {cands[0][2]}
        firsts = [c for c in rest if not (c[2] in seen or seen.add(c[2]))]
        rest = [c for c in rest if c not in firsts]
        tp = time.perf_counter()
        with ThreadPoolExecutor(max(1, jobs)) as pool:
            done = list(pool.map(lambda c: gate_one(*c, options, root), firsts))
        warmed = {
            "candidates": len(done),
            "wall_s": round(time.perf_counter() - tp, 2),
            "categories": dict(Counter(d.get("category") for d in done)),
        }
    rows: list[dict[str, Any]] = []
    lock = threading.Lock()
    if window_s > 0:
        deadline = time.monotonic() + window_s

    def one(c: tuple[str, str, Path]) -> None:
        if time.monotonic() > deadline:
            return
        d = gate_one(*c, options, root)
        with lock:
            rows.append(d)

    t1 = time.perf_counter()
    with ThreadPoolExecutor(max(1, jobs)) as pool:
        list(pool.map(one, rest))
    warm_wall = time.perf_counter() - t1
    # the same candidates as cache hits (a quick answer: folder bytes, options, toolchain)
    t2 = time.perf_counter()
    hits = [gate_one(*c, options, root, use_cache=True) for c in cands[: 1 + len(rows)]]
    cached_wall = time.perf_counter() - t2
    return {
        "path": path,
        "cold": {
            "wall_s": round(cold_wall, 2),
            "category": first.get("category"),
            "stages": first.get("stages"),
            "worker_start_s": list(resident.STATS.start_s),
        },
        "prewarm": warmed,
        "warm": summarize(rows, warm_wall),
        "cached": {
            "candidates": len(hits),
            "per_candidate_s": round(cached_wall / max(1, len(hits)), 4),
            "all_cached": all(h.get("cached") for h in hits),
        },
        "workers": {"started": resident.STATS.started, "retired": list(resident.STATS.retired)},
        "verdicts": {r["label"]: verdict_of(r) for r in [first, *rows]},
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=ROOT / "build" / "gate_bench")
    ap.add_argument("--backend", choices=("cuda", "emu"), default="cuda")
    ap.add_argument("--corpus", type=Path, default=ROOT / "expert_kernels")
    ap.add_argument("--phases", default="adversarial,interleave,throughput")
    ap.add_argument("--limit", type=int, default=120, help="candidates through the resident path")
    ap.add_argument("--child-limit", type=int, default=12, help="of them, through the child path")
    ap.add_argument(
        "--jobs", type=int, default=8, help="gates at once (builds in parallel, GPU runs in turn)"
    )
    ap.add_argument(
        "--skip",
        default="reduce_sum/naive",
        help="comma list of candidate labels left out of the throughput phase (reduce_sum/naive: 7.5 s per "
        "launch at its bench shape, it runs into the gate's time limit on either path)",
    )
    ap.add_argument(
        "--deadline-s", type=float, default=0.0, help="stop starting candidates after this (0: none)"
    )
    ap.add_argument(
        "--slow",
        default="sgemm,gemm_bf16,topk,attention_fwd",
        help="workloads whose naive kernel the slow phase gates",
    )
    ap.add_argument(
        "--prewarm",
        action="store_true",
        help="throughput: gate each workload's first candidate before the warm window (not counted)",
    )
    ap.add_argument(
        "--window-s", type=float, default=0.0, help="throughput: the warm window's length (0: --deadline-s)"
    )
    ns = ap.parse_args(argv)
    ns.out.mkdir(parents=True, exist_ok=True)
    STAGES.install(ns.backend)
    root = Path(tempfile.mkdtemp(prefix="gate_bench_"))
    t_start = time.monotonic()
    deadline = t_start + ns.deadline_s if ns.deadline_s else float("inf")
    doc: dict[str, Any] = {
        "started": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()),
        "backend": ns.backend,
        "command": "python3 benchmarks/gate_bench.py " + " ".join(argv or sys.argv[1:]),
        "cpus": os.cpu_count(),
    }
    if ns.backend == "cuda":
        from gpu_gate_check import device_line, measure_ceilings

        doc["device"] = device_line()
        doc["ceilings"] = measure_ceilings()

    def save() -> None:
        (ns.out / "gate_bench.json").write_text(json.dumps(doc, indent=1, default=str))

    phases = [p for p in ns.phases.split(",") if p]
    if "adversarial" in phases:
        doc["adversarial"] = adversarial(ns.backend, root / "adv", ns.jobs)
        save()
    if "interleave" in phases:
        doc["interleave"] = interleave(ns.backend, root / "mix")
        save()
    if "throughput" in phases:
        skip = {x for x in ns.skip.split(",") if x}
        cands = [c for c in corpus_states(ns.corpus) if c[0] not in skip]
        doc["candidates_available"] = len(cands)
        cands = cands[: ns.limit]
        doc["throughput"] = {}
        # the child path first (a fixed few), then the resident one up to the deadline
        for path, n in (("child", min(ns.child_limit, len(cands))), ("resident", len(cands))):
            if n < 2:
                continue
            doc["throughput"][path] = throughput(
                path, cands[:n], ns.backend, ns.jobs, root / f"tp-{path}", deadline, ns.prewarm, ns.window_s
            )
            save()
        if "child" in doc["throughput"] and "resident" in doc["throughput"]:
            res, chi = doc["throughput"]["resident"]["verdicts"], doc["throughput"]["child"]["verdicts"]
            both = [k for k in chi if k in res]
            doc["throughput_same_verdicts"] = {
                "compared": len(both),
                "differ": [k for k in both if res[k] != chi[k]],
            }
    if "slow" in phases:
        doc["slow"] = slow_kernels(ns.backend, ns.corpus, [x for x in ns.slow.split(",") if x], root / "slow")
        save()
    doc["elapsed_s"] = round(time.monotonic() - t_start, 1)
    save()
    print(report(doc))
    return 0


def report(doc: dict[str, Any]) -> str:
    lines = [f"gate_bench {doc['started']} {doc.get('device', doc['backend'])} cpus {doc['cpus']}"]
    if "adversarial" in doc:
        lines.append("| adversarial case | expected | resident | child | same |")
        lines.append("|---|---|---|---|---|")
        for r in doc["adversarial"]:
            lines.append(
                f"| {r['case']} | {' or '.join(r['expect'])} | {r['resident']['category']} ({r['resident']['wall_s']} s, {r['resident'].get('via')}) "
                f"| {r['child']['category']} ({r['child']['wall_s']} s) | {'yes' if r['same'] else 'NO'} |"
            )
    if "interleave" in doc:
        iv = doc["interleave"]
        lines.append(
            f"interleave: {' '.join(r['got'] for r in iv['rows'])} -> as expected: {iv['all_as_expected']}; "
            f"workers retired: {iv['workers_retired']}"
        )
    for path, t in (doc.get("throughput") or {}).items():
        w = t["warm"]
        lines.append(
            f"{path}: cold {t['cold']['wall_s']} s (worker start {t['cold']['worker_start_s']}); "
            f"prewarm {t['prewarm'] or '-'}; warm {w['candidates']} "
            f"in {w['wall_s']} s = {w['per_minute']}/min, median {w['median_candidate_s']} s/candidate, "
            f"amortized {w['amortized_s']} s, stages {w['median_stage_s']}, phases {w['median_phase_s']}; "
            f"cached {t['cached']['per_candidate_s']} s; {w['categories']}; rules {w['timing_rules']}; "
            f"workers {t['workers']}"
        )
    if doc.get("slow"):
        lines.append(
            "| slow naive kernel | category | estimate ms | median ms | rule | trials x reps | GPU run s | gate s |"
        )
        lines.append("|---|---|---|---|---|---|---|---|")
        for r in doc["slow"]:
            lines.append(
                f"| {r['label']} | {r['category']} | {r['estimate_ms']} | {r['median_ms']} | {r['rule']} "
                f"| {r['trials_x_reps']} | {r['run_s']} | {r['wall_s']} |"
            )
    if "throughput_same_verdicts" in doc:
        lines.append(f"same verdicts resident vs child: {doc['throughput_same_verdicts']}")
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
