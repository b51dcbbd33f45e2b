"""The cuda gate's verdict beside KernelBench's own evaluator's on the same real solutions (issue 29).

    source benchmarks/gpu_env.sh && python3 benchmarks/kernelbench_agreement.py --pairs PAIRS.json \\
        --kernelbench-src KERNELBENCH_CHECKOUT --out "$OUT/kb" --jobs 16 --deadline 300

PAIRS.json lists {name, problem, solution} (paths relative to it). For each pair: our side imports
the problem with the solution (`klineage import kernelbench --solution`) and gates the wrapped
solution with the `cuda` backend, unchanged (every shape, seed, run and profile-stage check);
KernelBench's side builds the original solution file with load_inline and evaluates it with
KernelBench's `eval_kernel_against_ref` from the given checkout (5 correctness trials, fp32), or,
without a checkout, with the protocol re-implemented in kernelbench_gpu_check.py.

Why it is scheduled this way: in the s9 call 16 pairs each ran `klineage gate` and KernelBench's
build side by side; every gate process started its own resident worker (interpreter, torch, CUDA
context) while holding the device lock, and each load_inline build (~60 s) came after. Here:
- the CPU work (our imports, KernelBench's load_inline builds into one extensions folder per pair,
  as KernelBench's `build_compile_cache` does) starts at once on `--jobs` processes;
- our gates run in this one process (threads): their builds in parallel, their device turns
  serialized by the gate's device lock, one resident worker serving all of them;
- a pair's KernelBench evaluation starts as soon as its build is there, in a child process that
  holds the same device lock for its trials only (no gate is timed while it runs);
- rows are printed and appended to agreement.jsonl as they land; no pair starts after --deadline.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import threading
import time
import types
from collections.abc import Callable, Iterable
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

#: KernelBench's fp32 tolerance before its per-precision table (v0 and v0.1: atol = rtol = 1e-2),
#: the one the public leaderboard's verdicts were given with and the one imported problems use
V0_TOLERANCE = 1e-2
#: modules kernelbench/utils.py imports for prompting and progress bars, none used by evaluation
EVAL_UNUSED_IMPORTS = ("dotenv", "tqdm", "openai", "litellm", "requests", "numpy")
TRIALS = 5
SEED = 42
#: which verdict a step of the schedule gives when it fails
SIDES = {"_import": "gate", "_gate": "gate", "_build": "kernelbench", "_evaluate": "kernelbench"}


@dataclass
class Pair:
    name: str
    problem: Path
    solution: Path


#: what a step of the schedule gives: its side's verdict fields, or the side's next step
Step = dict[str, Any] | Callable[[Pair], "Step"]


@dataclass
class Row:
    """Both verdicts of one pair; `agree` is None when a side gave no verdict."""

    name: str
    gate: str = ""
    gate_message: str = ""
    kernelbench: str = ""
    kernelbench_v0: str = ""
    kernelbench_detail: str = ""
    agree: bool | None = None
    agree_v0: bool | None = None
    seconds: dict[str, float] = field(default_factory=dict)


def judge(row: Row) -> Row:
    """Fill `agree` (KernelBench's evaluator as it runs) and `agree_v0` (its v0 tolerance): a side
    whose process failed (no verdict) judges nothing."""
    ours = row.gate == "ok"
    has_gate = bool(row.gate) and not row.gate.startswith(("rc ", "error"))
    for attr, theirs in (("agree", row.kernelbench), ("agree_v0", row.kernelbench_v0)):
        judged = has_gate and theirs in ("correct", "incorrect", "compile_error")
        setattr(row, attr, (ours == (theirs == "correct")) if judged else None)
    return row


def load_pairs(path: Path) -> list[Pair]:
    base = path.parent
    return [
        Pair(it["name"], base / it["problem"], base / it["solution"]) for it in json.loads(path.read_text())
    ]


# ---------------------------------------------------------------- KernelBench's side (children)


def stub_unused_imports(names: Iterable[str] = EVAL_UNUSED_IMPORTS) -> list[str]:
    """Stand-ins for modules KernelBench's package imports but its evaluator never calls, where
    they are not installed (the GPU machine has no registry); returns the names stubbed. Import
    torch first: it looks for numpy on its own."""
    stubbed = []
    for name in names:
        try:
            __import__(name)
        except ImportError:
            mod = types.ModuleType(name)
            mod.__getattr__ = lambda attr, _n=name: _unavailable(_n, attr)  # type: ignore[method-assign]
            sys.modules[name] = mod
            stubbed.append(name)
    return stubbed


def _unavailable(module: str, attr: str) -> Callable[..., Any]:
    if attr.startswith("__"):  # a module's own attributes (__file__, __path__): not there
        raise AttributeError(attr)

    def call(*_a: Any, **_k: Any) -> Any:
        if attr == "load_dotenv":
            return False
        raise RuntimeError(f"{module}.{attr} is not installed here (the evaluation does not need it)")

    return call


class ToleranceProbe:
    """Wraps torch.allclose while KernelBench's evaluator runs: its verdict is unchanged (the call
    returns what it would), and each comparison is also made at `tol` (the v0 tolerance), so one
    evaluation gives both verdicts."""

    def __init__(self, torch: Any, tol: float = V0_TOLERANCE) -> None:
        self.torch, self.tol, self.at_tol = torch, tol, []
        self.max_abs: float = 0.0
        self._orig = torch.allclose

    def __enter__(self) -> ToleranceProbe:
        def allclose(a: Any, b: Any, *args: Any, **kw: Any) -> bool:
            try:  # the side measurement never changes what the evaluator sees
                self.at_tol.append(bool(self._orig(a, b, atol=self.tol, rtol=self.tol)))
                self.max_abs = max(self.max_abs, float((a - b).abs().max()))
            except Exception:  # noqa: BLE001
                self.at_tol.append(False)
            return self._orig(a, b, *args, **kw)

        self.torch.allclose = allclose
        return self

    def __exit__(self, *exc: object) -> None:
        self.torch.allclose = self._orig


def kb_build(kb_src: str, solution: Path, build_dir: Path) -> dict[str, Any]:
    """CPU only: the solution's load_inline build into its own extensions folder."""
    os.environ["TORCH_EXTENSIONS_DIR"] = str(build_dir)
    if kb_src:
        import torch  # noqa: F401 - first: torch probes numpy itself, before any stand-in exists

        sys.path.insert(0, str(Path(kb_src) / "src"))
        stub_unused_imports()
        from kernelbench.eval import build_compile_cache

        ok, _log, err = build_compile_cache(solution.read_text(), build_dir=str(build_dir))
        return {"ok": bool(ok), "error": str(err or "")[:300]}
    from klineage.workload import import_user_file

    try:
        import_user_file(solution, "ModelNew.py")
    except Exception as e:  # noqa: BLE001 - a build that fails is KernelBench's compile_error
        return {"ok": False, "error": f"{type(e).__name__}: {e}"[:300]}
    return {"ok": True, "error": ""}


def kb_eval(kb_src: str, problem: Path, solution: Path, build_dir: Path) -> dict[str, Any]:
    """On the GPU: KernelBench's evaluator on the prebuilt solution, the device held for it alone."""
    import torch

    from klineage.gates.cuda.device_lock import device_slot

    os.environ["TORCH_EXTENSIONS_DIR"] = str(build_dir)
    if not kb_src:
        sys.path.insert(0, str(Path(__file__).parent))
        from kernelbench_gpu_check import evaluate

        with device_slot():
            r = evaluate(problem, solution, timed=False)
        ok = r["correct"] == r["trials"]
        return {
            "verdict": "correct" if ok else "incorrect",
            "v0": "correct" if ok else "incorrect",
            "detail": f"{r['correct']}/{r['trials']} trials, max |diff| {r['max_abs_diff']:.3g}",
        }
    sys.path.insert(0, str(Path(kb_src) / "src"))
    stubbed = stub_unused_imports()
    from kernelbench.eval import eval_kernel_against_ref

    with device_slot(), ToleranceProbe(torch) as probe:
        res = eval_kernel_against_ref(
            problem.read_text(),
            solution.read_text(),
            seed_num=SEED,
            num_correct_trials=TRIALS,
            measure_performance=False,
            build_dir=str(build_dir),
            device=torch.device("cuda:0"),
        )
    return verdicts(res, probe, stubbed)


def verdicts(res: Any, probe: ToleranceProbe, stubbed: list[str]) -> dict[str, Any]:
    """KernelBench's result as a verdict, at its own tolerance and at v0's."""
    if res is None:
        return {"verdict": "error", "v0": "error", "detail": "KernelBench asked for a retry (lock file)"}
    meta = {k: str(v)[:200] for k, v in res.metadata.items() if k not in ("hardware", "device")}
    if not res.compiled:
        verdict = v0 = "compile_error"
    else:
        verdict = "correct" if res.correctness else "incorrect"
        full = len(probe.at_tol) == TRIALS
        v0 = "correct" if full and all(probe.at_tol) else "incorrect"
    detail = f"max |diff| {probe.max_abs:.3g}; " + json.dumps(meta)[:400]
    return {"verdict": verdict, "v0": v0, "detail": detail, "stubbed": stubbed}


# ---------------------------------------------------------------- our side and the schedule


def _run(cmd: list[str], log: Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=400, env=env)
    log.write_text(f"$ {' '.join(cmd)}\n{r.stdout}\n{r.stderr}")
    return r


def _last_json(r: subprocess.CompletedProcess[str]) -> dict[str, Any] | None:
    lines = r.stdout.strip().splitlines()
    try:
        return json.loads(lines[-1]) if r.returncode == 0 and lines else None
    except json.JSONDecodeError:
        return None


def _tail(r: subprocess.CompletedProcess[str]) -> str:
    return ((r.stderr.strip().splitlines() or [""])[-1])[:200]


def _worker_phases(artifact_id: str) -> dict[str, float]:
    """The gate worker's seconds per phase (load, correctness: shapes x seeds x runs, profile),
    left in the archived run folder's result.json: the part of a gate that holds the device."""
    from klineage.gates import cache

    root = cache.artifact_dir(artifact_id or "none").parent.parent
    for f in root.glob(f"*/{artifact_id}*/run/result.json") if artifact_id else ():
        try:
            phases = json.loads(f.read_text()).get("phases") or {}
        except (OSError, json.JSONDecodeError):
            continue
        return {f"worker_{k}": round(float(v), 2) for k, v in phases.items()}
    return {}


class Agreement:
    """One run: the CPU pool (imports, builds), the gate pool (our gates in this process) and the
    evaluation pool (KernelBench's children); a pair's row is emitted once both sides are in."""

    def __init__(
        self, pairs: list[Pair], out: Path, kb_src: str, jobs: int, deadline_s: float, backend: str = "cuda"
    ) -> None:
        self.pairs, self.out, self.kb_src, self.deadline_s = pairs, out, kb_src, deadline_s
        self.backend = backend
        self.cpu = ThreadPoolExecutor(jobs)
        self.gpu = ThreadPoolExecutor(max(2, jobs // 2))
        self.rows = {p.name: Row(p.name) for p in pairs}
        self.sides: dict[str, int] = {p.name: 0 for p in pairs}
        self.lock = threading.Lock()
        self.t0 = time.monotonic()
        self.skipped: set[str] = set()
        self.unfinished: list[str] = []
        self.futures: list[Future[Any]] = []
        self.log = out / "agreement.jsonl"

    def run(self, stop_s: float = 0.0) -> list[Row]:
        """Every pair's two sides; with `stop_s`, what has not finished by then is left out (its
        name in `unfinished`) so that the table is still written inside the caller's time limit."""
        self.out.mkdir(parents=True, exist_ok=True)
        self.log.write_text("")
        for p in self.pairs:  # the pools are first in, first out: pairs start in the list's order
            self._submit(self.cpu, self._build, p)
            self._submit(self.cpu, self._import, p)
        while True:  # a finished step may submit the next one: wait until none is left
            with self.lock:
                pending = [f for f in self.futures if not f.done()]
            if not pending or (stop_s and time.monotonic() - self.t0 > stop_s):
                break
            wait(pending, timeout=2.0, return_when=FIRST_COMPLETED)
        for pool in (self.cpu, self.gpu):
            pool.shutdown(wait=not pending, cancel_futures=True)
        with self.lock:
            self.unfinished = [
                p.name for p in self.pairs if self.sides[p.name] < 2 and p.name not in self.skipped
            ]
            return [judge(self.rows[p.name]) for p in self.pairs if p.name not in self.skipped]

    def _submit(self, pool: ThreadPoolExecutor, fn: Callable[[Pair], Step], p: Pair) -> None:
        side = SIDES[fn.__name__]

        def step() -> None:
            t = time.monotonic()
            first = fn.__name__ in ("_build", "_import")
            if first and self.deadline_s and t - self.t0 > self.deadline_s:
                with self.lock:
                    self.skipped.add(p.name)
                self._side_done(p, {side: "not started (deadline)"})
                return
            try:
                then = fn(p)
            except Exception as e:  # noqa: BLE001 - one pair's failure is its row, not the run's
                then = {side: f"error: {type(e).__name__}: {e}"[:200]}
            with self.lock:
                self.rows[p.name].seconds[fn.__name__.strip("_")] = round(time.monotonic() - t, 1)
            if isinstance(then, dict):
                self._side_done(p, then)
            else:  # the side's next step: the device part
                self._submit(self.gpu, then, p)

        with self.lock:
            self.futures.append(pool.submit(step))

    def _self_cmd(self, *args: str) -> list[str]:
        return [sys.executable, __file__, *args, "--kernelbench-src", self.kb_src]

    def _build(self, p: Pair) -> Step:
        build = self.out / f"{p.name}.ext"
        r = _run(
            self._self_cmd("--kb-build", str(p.solution), str(build)), self.out / f"{p.name}.kb_build.log"
        )
        res = _last_json(r)
        if res is None or not res["ok"]:
            why = res["error"] if res else _tail(r)
            return {
                "kernelbench": "compile_error",
                "kernelbench_v0": "compile_error",
                "kernelbench_detail": why,
            }
        return self._evaluate

    def _evaluate(self, p: Pair) -> Step:
        build = self.out / f"{p.name}.ext"
        cmd = self._self_cmd("--kb-eval", str(p.problem), str(p.solution), str(build))
        r = _run(cmd, self.out / f"{p.name}.kb_eval.log")
        res = _last_json(r)
        if res is None:
            return {"kernelbench": f"error: {_tail(r)}", "kernelbench_v0": "error"}
        return {
            "kernelbench": res["verdict"],
            "kernelbench_v0": res["v0"],
            "kernelbench_detail": res["detail"],
        }

    def _import(self, p: Pair) -> Step:
        wl = self.out / p.name
        cmd = [
            sys.executable,
            "-m",
            "klineage",
            "import",
            "kernelbench",
            str(p.problem),
            "--solution",
            str(p.solution),
            "--out",
            str(wl),
        ]
        env = os.environ | {"OMP_NUM_THREADS": "2"}  # the reference on the CPU, beside 15 other jobs
        r = _run(cmd, self.out / f"{p.name}.import.log", env)
        return {"gate": "refused: " + _tail(r)} if r.returncode != 0 else self._gate

    def _gate(self, p: Pair) -> Step:
        from klineage.gates.backend import GateOptions
        from klineage.gates.gate import gate

        wl = self.out / p.name
        res = gate(wl / "solution.cu", wl, GateOptions(backend=self.backend))
        (self.out / f"{p.name}.gate.json").write_text(json.dumps(res.to_dict(), indent=1, default=str))
        self.rows[p.name].seconds |= {"gate_own": round(res.elapsed_s, 1)} | _worker_phases(res.artifact_id)
        return {"gate": res.category, "gate_message": res.message[:300]}

    def _side_done(self, p: Pair, fields: dict[str, Any]) -> None:
        with self.lock:
            row = self.rows[p.name]
            for k, v in fields.items():
                setattr(row, k, v)
            self.sides[p.name] += 1
            if self.sides[p.name] < 2:
                return
            judge(row)
            with self.log.open("a") as f:
                f.write(json.dumps(asdict(row)) + "\n")
        print(
            f"[{time.monotonic() - self.t0:6.1f}s] {p.name}: {row.gate} / {row.kernelbench} "
            f"(v0 {row.kernelbench_v0})",
            flush=True,
        )


def table(rows: list[Row], skipped: Iterable[str] = (), unfinished: Iterable[str] = ()) -> str:
    lines = [
        "| solution | cuda gate | KernelBench | KernelBench at v0's 1e-2 | agree | agree (v0) |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    yn = {None: "-", True: "yes", False: "NO"}
    for r in rows:
        lines.append(
            f"| {r.name} | {r.gate or '-'} | {r.kernelbench or '-'} | {r.kernelbench_v0 or '-'} | "
            f"{yn[r.agree]} | {yn[r.agree_v0]} |"
        )
    for attr in ("agree", "agree_v0"):
        judged = [getattr(r, attr) for r in rows if getattr(r, attr) is not None]
        lines.append(f"{attr}: {sum(judged)}/{len(judged)} ({len(rows) - len(judged)} without both verdicts)")
    lines += [f"disagreement {r.name}: {explain(r)}" for r in rows if False in (r.agree, r.agree_v0)]
    lines.append(where_the_time_went(rows))
    for what, names in (
        ("not started before the deadline", sorted(skipped)),
        ("unfinished at --stop", unfinished),
    ):
        if names:
            lines.append(f"{what} ({len(list(names))}): {', '.join(names)}")
    return "\n".join(lines)


def explain(row: Row) -> str:
    """Which side is stricter where the verdicts differ (a first reading, for a person to check)."""
    if row.gate != "ok":
        theirs = row.kernelbench if row.agree is False else row.kernelbench_v0
        return f"KernelBench says {theirs}; our gate is stricter: {row.gate}: {row.gate_message}"
    if row.kernelbench == "incorrect" and row.kernelbench_v0 == "correct":
        return (
            "the gate accepts; KernelBench 423217d's fp32 tolerance (atol = rtol = 1e-4) rejects what its "
            "v0 tolerance (1e-2, the leaderboard's and the gate's for imported problems) accepts: "
            + row.kernelbench_detail[:160]
        )
    return f"the gate accepts; KernelBench says {row.kernelbench}: {row.kernelbench_detail[:200]}"


def where_the_time_went(rows: list[Row]) -> str:
    """Median and total seconds of each step over the rows (a step's seconds include its wait for
    the device; gate_own is the gate's own elapsed time, gate_profile its profile stage)."""
    steps = sorted({k for r in rows for k in r.seconds})
    parts = []
    for k in steps:
        xs = sorted(r.seconds[k] for r in rows if k in r.seconds)
        parts.append(f"{k} median {xs[len(xs) // 2]:.1f} s / total {sum(xs):.0f} s (n={len(xs)})")
    return "seconds: " + "; ".join(parts) if parts else "seconds: none"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--pairs", type=Path)
    p.add_argument("--out", type=Path, default=Path("kb_agreement"))
    p.add_argument("--kernelbench-src", default="", help="a KernelBench checkout: use its evaluator")
    p.add_argument("--backend", default="cuda", help="our gate's backend (emu: a CPU check of the script)")
    p.add_argument("--jobs", type=int, default=16, help="CPU processes for imports and builds")
    p.add_argument("--deadline", type=float, default=0.0, help="start no pair after this many seconds")
    p.add_argument("--stop", type=float, default=0.0, help="write the table after this many seconds")
    p.add_argument("--kb-build", nargs=2, metavar=("SOLUTION", "BUILD_DIR"), help=argparse.SUPPRESS)
    p.add_argument("--kb-eval", nargs=3, metavar=("PROBLEM", "SOLUTION", "BUILD_DIR"), help=argparse.SUPPRESS)
    a = p.parse_args(argv)
    if a.kb_build:
        print(json.dumps(kb_build(a.kernelbench_src, Path(a.kb_build[0]), Path(a.kb_build[1]))))
        return 0
    if a.kb_eval:
        print(json.dumps(kb_eval(a.kernelbench_src, *(Path(x) for x in a.kb_eval))))
        return 0
    if a.pairs is None or not a.pairs.is_file():
        print(f"kernelbench_agreement: --pairs {a.pairs}: no such file", file=sys.stderr)
        return 2
    run = Agreement(load_pairs(a.pairs), a.out, a.kernelbench_src, a.jobs, a.deadline, a.backend)
    rows = run.run(a.stop)
    text = table(rows, run.skipped, run.unfinished)
    (a.out / "agreement.md").write_text(text + "\n")
    (a.out / "agreement.json").write_text(json.dumps([asdict(r) for r in rows], indent=1))
    print(text, flush=True)
    if run.unfinished:  # steps still running in threads: do not wait for them at exit
        os._exit(0)
    return 0


if __name__ == "__main__":
    sys.exit(main())
