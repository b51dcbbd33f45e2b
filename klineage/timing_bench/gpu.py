"""The GPU half of `klineage timings bench` (and of benchmarks/corpus_bench.py, which shares the
build and timing helpers): build every distinct kernel in parallel, check each with the
correctness protocol on the `test` shapes, time it at the bench shape with the `cuda` gate's
timing, and the workload's vendor call (torch) in the same process.

torch and the cuda gate are imported when a GPU is about to be used, so `--help` and `--dry-run`
stay cheap and work on a machine without one.
"""

from __future__ import annotations

import os
import tempfile
import time
import traceback
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from klineage.timing_bench.options import NOT_TIMED, BenchInputError

#: a launch slower than this is timed by that one launch (reduce_sum's one-thread kernels)
SLOW_LAUNCH_MS = 200.0


def log(msg: str, sink: Any | None = None) -> None:
    """Print a line (flushed: a cut-short device call keeps what it printed) and copy it to the log."""
    print(msg, flush=True)
    if sink is not None:
        sink.write(msg + "\n")
        sink.flush()


def build_all(jobs: list[tuple[str, str, Path]], workroot: Path) -> dict[tuple[str, str], Any]:
    """Build every (workload, variant, path) in parallel; returns BuildOutcome by key."""
    from klineage.gates.backend import GateOptions
    from klineage.gates.cuda.build import build

    opts = GateOptions(backend="cuda", timeout_s=600.0)

    def one(job: tuple[str, str, Path]) -> tuple[tuple[str, str], Any]:
        wl, var, path = job
        return (wl, var), build(path.read_text(), workroot / f"{wl}__{var}", opts)

    with ThreadPoolExecutor(max_workers=max(1, min(len(jobs), os.cpu_count() or 1))) as pool:
        return dict(pool.map(one, jobs))


def time_variant(
    runner: Any, bench: Any, stream: Any, budget_s: float, slow_ok: bool
) -> tuple[Any, int, int]:
    """(summary, reps, trials). `slow_ok`: a launch over SLOW_LAUNCH_MS is timed once."""
    from klineage.gates.cuda.stats import summarize
    from klineage.gates.cuda.timing import time_reps, timed

    def step() -> None:
        runner.launch_async(bench.values, stream.cuda_stream)

    if slow_ok:
        first = time_reps(step, bench.refill, stream, reps=1, trials=1, warmup=0)
        if first[0][0] > SLOW_LAUNCH_MS:
            return summarize(first), 1, 1
    t = timed(step, bench.refill, stream, budget_s=budget_s)
    return t.summary, t.summary.reps_per_trial, t.summary.trials


@dataclass
class Device:
    """The GPU the kernels are timed on, and what each timing needs to know about the run."""

    handle: Any
    name: str
    torch_version: str
    budget_s: float
    #: True once the --deadline-s has passed: nothing more is timed
    past_deadline: Callable[[], bool]


def open_device(budget_s: float, past_deadline: Callable[[], bool]) -> Device:
    """The current CUDA device; without one, a BenchInputError (one line, exit 2)."""
    import torch

    if not torch.cuda.is_available():
        raise BenchInputError(
            "no CUDA GPU visible here: `klineage timings bench` builds and times kernels on a GPU "
            "(use --dry-run to list them)"
        )
    handle = torch.device("cuda", torch.cuda.current_device())
    return Device(handle, torch.cuda.get_device_name(handle), torch.__version__, budget_s, past_deadline)


def build_sources(
    sources: dict[tuple[str, str], Path], n_workloads: int, sink: Any
) -> dict[tuple[str, str], Any]:
    """Every distinct kernel built (in parallel, into a fresh temporary folder), logged."""
    t0 = time.perf_counter()
    built = build_all(
        [(n, h, path) for (n, h), path in sources.items()],
        Path(tempfile.mkdtemp(prefix="materialized_bench_")),
    )
    log(
        f"built {len(sources)} distinct kernels of {n_workloads} workloads in {time.perf_counter() - t0:.1f} s",
        sink,
    )
    return built


def time_workload(
    name: str, folder: Path, built: dict[tuple[str, str], Any], dev: Device, sink: Any
) -> dict[str, Any]:
    """One workload's row: each of its built kernels checked and timed, then torch; an exception
    is reported in the row (and its traceback in the log) and the run goes on."""
    import torch

    from klineage import load_workload
    from klineage.gates.cuda.device_lock import device_slot
    from klineage.gates.cuda.timing import Bench, timed

    row: dict[str, Any] = {"name": name, "kernels": {}}
    keys = [key for key in built if key[0] == name]
    if dev.past_deadline():  # not even the workload's inputs
        row["kernels"] = {h: {"check": NOT_TIMED} for _, h in keys}
        return row
    try:
        wl = load_workload(folder)
        bindings = wl.shape_set("bench")[0]
        row["bench"] = bindings
        # the host-wide device lock of the cuda gate, held for the whole workload (its kernels and
        # torch measured under one condition): a bench beside a materializer's loop or a second
        # bench takes turns with them instead of timing while their kernels share the GPU
        with device_slot() as waited:
            row["device_wait_s"] = round(waited, 3)
            bench = Bench(wl, bindings, dev.handle)
            stream = torch.cuda.current_stream(dev.handle)
            for key in keys:
                row["kernels"][key[1]] = k = {}
                time_kernel(k, built[key], wl, bench, stream, dev)
            if not dev.past_deadline():
                tv = timed(bench.vendor_call(), bench.refill, stream, budget_s=dev.budget_s)
                row["torch_ms"] = tv.summary.median_ms
            del bench
            torch.cuda.synchronize(dev.handle)
            torch.cuda.empty_cache()
    except Exception as e:  # report and keep going
        row["error"] = f"{type(e).__name__}: {e}"
        log(traceback.format_exc(), sink)
    return row


def time_kernel(k: dict[str, Any], b: Any, wl: Any, bench: Any, stream: Any, dev: Device) -> None:
    """One built kernel into `k`: its check on the test shapes (two seeds), and when it passes its
    time with the spread the materializer's judge needs (materialize/measured.py). `k` is already
    in the row, so a kernel whose launch raises is still listed with what was known of it."""
    from klineage.gates.cuda.runner import CudaRunner
    from klineage.gates.protocol import check_workload

    t_k = time.perf_counter()
    if dev.past_deadline():
        k["check"] = NOT_TIMED
        return
    if not b.ok:
        k["check"] = f"build failed: {b.message[:300]}"
        return
    runner = CudaRunner(b.library, wl, dev.handle)
    v = check_workload(wl, runner, "test", seeds=(0, 1))
    k["check"] = v.category if v.ok else f"{v.category}: {v.message[:300]}"
    if v.ok:
        s, reps, trials = time_variant(runner, bench, stream, dev.budget_s, slow_ok=True)
        k["ms"], k["timed"] = s.median_ms, f"{trials}x{reps}"
        k["trial_ms"], k["min_ms"], k["max_ms"] = s.trial_medians_ms, s.min_ms, s.max_ms
    k["wall_s"] = round(time.perf_counter() - t_k, 2)
