"""Where the time of a mining walk goes (issue 7): `mine_corpus` on the given workloads, cold (a
fresh $KLINEAGE_HOME and store), with timers around each stage of each gate and of each step.

    python benchmarks/walk_profile.py expert_kernels/rmsnorm
    python benchmarks/walk_profile.py expert_kernels/layernorm --max-steps 10 --json out.json

Stages (seconds summed over calls; calls in different threads overlap, so they can add up to more
than the wall time): the gate's parse stage, nvcc (cubin + ptxas resources), the backend build
(emu: tree-sitter translation, then g++), the child run (fork from the zygote, workload load,
inputs, reference, launches, checks), the cache; the walker's candidate computation (every
operator's find + remove, in the driver under the GIL), its roundtrip without the gates it
waits for, the gates it waits for inside and outside the roundtrip, and the store's
transactions. CPU seconds of this process and of its reaped children are printed too (the
zygote's children are the zygote's: not counted). Timers only wrap functions: verdicts and rows
are those of a plain `klineage mine`.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import json
import os
import resource
import sys
import tempfile
import threading
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

import klineage.executor as executor_mod  # noqa: E402
import klineage.gates.cache as cache_mod  # noqa: E402
import klineage.gates.emu.backend as emu_backend  # noqa: E402
import klineage.gates.emu.compile as emu_compile  # noqa: E402
import klineage.gates.gate as gate_mod  # noqa: E402
import klineage.store.db as db_mod  # noqa: E402
import klineage.walker as walker_mod  # noqa: E402

TOTAL: dict[str, float] = defaultdict(float)
CALLS: dict[str, int] = defaultdict(int)
_lock = threading.Lock()
_where = threading.local()


def _add(label: str, seconds: float) -> None:
    with _lock:
        TOTAL[label] += seconds
        CALLS[label] += 1


def _timed(owner: Any, name: str, label: str) -> None:
    real = getattr(owner, name)

    @functools.wraps(real)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        t0 = time.perf_counter()
        try:
            return real(*args, **kwargs)
        finally:
            _add(label, time.perf_counter() - t0)

    setattr(owner, name, wrapper)


def install() -> None:
    _timed(gate_mod, "check_parse", "gate: parse stage")
    _timed(gate_mod, "compile_cubin", "gate: nvcc (cubin, resources)")
    _timed(emu_backend, "translate", "gate: emu translation")
    _timed(emu_compile, "compile_kernel", "gate: g++ (emu build)")
    _timed(gate_mod, "run_worker", "gate: child run")
    _timed(cache_mod, "load_cached", "gate: cache lookup")
    _timed(cache_mod, "store", "gate: cache store")
    _timed(walker_mod.Walker, "_candidates", "walk: candidates (find + remove)")
    _timed(walker_mod.Walker, "_gate_until", "walk: waiting for a state's verdicts")

    real_gate = executor_mod.gate

    def gate(*args: Any, **kwargs: Any) -> Any:
        t0 = time.perf_counter()
        result = real_gate(*args, **kwargs)
        _add("gate: total (cached)" if result.cached else "gate: total (gated)", time.perf_counter() - t0)
        return result

    executor_mod.gate = gate

    real_rt = walker_mod.Walker._roundtrip

    def roundtrip(self: Any, *args: Any, **kwargs: Any) -> Any:
        _where.waited = 0.0
        _where.inside = True
        t0 = time.perf_counter()
        try:
            return real_rt(self, *args, **kwargs)
        finally:
            _where.inside = False
            spent = time.perf_counter() - t0
            _add("walk: roundtrip without its gates", spent - _where.waited)

    walker_mod.Walker._roundtrip = roundtrip

    real_one = walker_mod.Walker._gate

    def one(self: Any, *args: Any, **kwargs: Any) -> Any:
        t0 = time.perf_counter()
        try:
            return real_one(self, *args, **kwargs)
        finally:
            spent = time.perf_counter() - t0
            if getattr(_where, "inside", False):
                _where.waited += spent
                _add("walk: waiting for roundtrip gates", spent)
            else:
                _add("walk: waiting for single gates", spent)

    walker_mod.Walker._gate = one

    real_tx = db_mod.Store.transaction

    @contextlib.contextmanager
    def transaction(self: Any) -> Any:
        t0 = time.perf_counter()
        with real_tx(self) as con:
            yield con
        _add("store: transactions", time.perf_counter() - t0)

    db_mod.Store.transaction = transaction


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("dirs", nargs="+", type=Path)
    ap.add_argument("--max-steps", type=int, default=None)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--json", type=Path, default=None, help="also write the figures here")
    args = ap.parse_args()
    home = Path(tempfile.mkdtemp(prefix="klineage-walk-profile-"))
    os.environ["KLINEAGE_HOME"] = str(home / "home")
    install()
    from klineage.mining import mine_corpus

    kwargs: dict[str, Any] = {"workers": args.workers}
    if args.max_steps is not None:
        kwargs["max_steps"] = args.max_steps
    c0 = resource.getrusage(resource.RUSAGE_SELF)
    t0 = time.perf_counter()
    report = mine_corpus(args.dirs, db=home / "store.duckdb", **kwargs)
    wall = time.perf_counter() - t0
    c1, ch = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    walks = [{k: v for k, v in w.items() if k != "skills"} for w in report["workloads"]]
    out = {
        "wall_s": round(wall, 2),
        "cpu_self_s": round(c1.ru_utime + c1.ru_stime - c0.ru_utime - c0.ru_stime, 2),
        "cpu_children_s": round(ch.ru_utime + ch.ru_stime, 2),
        "walks": walks,
        "stages": {
            k: {"s": round(TOTAL[k], 2), "calls": CALLS[k]} for k in sorted(TOTAL, key=lambda k: -TOTAL[k])
        },
        "home": str(home),
    }
    for w in walks:
        print(
            f"{w['workload']}: {w['accepted']} steps, {w['gate_runs']} verdicts recorded, {w['elapsed_s']:.1f} s"
        )
    print(
        f"wall {wall:.1f} s; cpu: this process {out['cpu_self_s']} s, reaped children {out['cpu_children_s']} s"
    )
    for k, v in out["stages"].items():
        print(f"  {k:40s} {v['s']:9.2f} s  {v['calls']:5d} calls  {v['s'] / max(v['calls'], 1):7.3f} s/call")
    if args.json:
        args.json.write_text(json.dumps(out, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
