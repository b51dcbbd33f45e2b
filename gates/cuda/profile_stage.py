"""The `cuda` backend's profile stage (child process, after correctness passed).

Options read from GateOptions.extra (all optional): bench_shape (dict), reps, trials, warmup,
timing_budget_s, slow_ms and slow_budget_s (the timing rule for slow kernels,
gates/cuda/stats.plan_timing), sol_margin, sol_ceilings (a Ceilings dict, to skip measuring),
skip_side_stream (bool, to show what the speed-of-light check alone catches), artifacts_dir (keep
traces and tool logs there), energy_seconds.
"""

from __future__ import annotations

import os
import time
from dataclasses import asdict
from pathlib import Path
from typing import Any

import torch

from klineage.gates.backend import GateOptions, ProfileOutcome
from klineage.gates.cuda import sanitize, sidestream, sol, stats, timing
from klineage.gates.cuda.probe import probe_command
from klineage.gates.cuda.runner import CudaRunner
from klineage.gates.cuda.support import MARKER_KERNEL
from klineage.gates.result import Timing
from klineage.workload import Workload


def bench_bindings(workload: Workload, options: GateOptions) -> dict[str, int]:
    """options.extra['bench_shape'], else the first bench shape, else the last test shape."""
    extra = options.extra.get("bench_shape")
    if extra:
        return {k: int(v) for k, v in dict(extra).items()}
    bench = workload.shape_set("bench")
    if bench:
        return bench[0]
    return workload.shape_set("test")[-1]


def _artifacts(options: GateOptions) -> Path | None:
    d = options.extra.get("artifacts_dir")
    if not d:
        return None
    p = Path(d)
    p.mkdir(parents=True, exist_ok=True)
    return p


def _tool_timeout(options: GateOptions, share: float) -> float:
    return max(30.0, options.timeout_s * share)


def run_sanitizers(
    runner: CudaRunner, workload: Workload, options: GateOptions, profile: dict[str, Any]
) -> ProfileOutcome | None:
    if workload.source_dir is None:
        profile["sanitizer"] = {"skipped": "workload has no folder for the probe process"}
        return None
    bindings = workload.shape_set("test")[0]
    probe = probe_command(runner.library.path, workload.source_dir, bindings)
    # no caching allocator: memcheck then sees each tensor's exact bounds, not a 2 MB segment
    env = dict(os.environ, PYTORCH_NO_CUDA_MEMORY_CACHING="1")
    runs = sanitize.run_all(probe, _tool_timeout(options, 0.3), env=env)
    art = _artifacts(options)
    report: dict[str, Any] = {"shape": bindings}
    for r in runs:
        report[r.tool] = {
            "returncode": r.returncode,
            "timed_out": r.timed_out,
            "finding": r.finding.message() if r.finding else None,
        }
        if art is not None:
            (art / f"sanitizer_{r.tool}.log").write_text(r.output)
    profile["sanitizer"] = report
    for r in runs:  # memcheck first: an out-of-bounds access also makes racecheck noisy
        if r.finding is not None:
            return ProfileOutcome(r.finding.category, r.finding.message(), None, profile)
    for r in runs:
        if r.returncode not in (0,) and not r.timed_out and r.returncode != -1:
            profile["sanitizer"][r.tool]["tail"] = r.output.strip().splitlines()[-5:]
    return None


def run_profile(runner: CudaRunner, workload: Workload, options: GateOptions) -> ProfileOutcome | None:
    profile: dict[str, Any] = {}
    if options.sanitize:
        rejected = run_sanitizers(runner, workload, options, profile)
        if rejected is not None:
            return rejected
    if not options.time_kernel:
        return ProfileOutcome(profile=profile) if profile else None

    x = options.extra
    bindings = bench_bindings(workload, options)
    device = runner.device
    stream = torch.cuda.Stream(device)
    t_bench = time.perf_counter()
    bench = timing.Bench(workload, bindings, device)
    phases = {"bench_setup_s": time.perf_counter() - t_bench}
    reps = int(x.get("reps", timing.DEFAULT_REPS))
    trials = int(x.get("trials", timing.DEFAULT_TRIALS))
    warmup = int(x.get("warmup", timing.DEFAULT_WARMUP))
    budget = float(x.get("timing_budget_s", 30.0))
    slow = (float(x.get("slow_ms", timing.SLOW_MS)), float(x.get("slow_budget_s", timing.SLOW_BUDGET_S)))

    def cand() -> None:
        runner.launch_async(bench.values, stream.cuda_stream)

    art = _artifacts(options)
    trace_path = (art / "cupti_trace.json") if art else None
    t0 = time.perf_counter()
    # `expect_very_slow` (a materializer whose line head takes a second or more a launch): the
    # first look is taken under the CUPTI trace, so that one launch is the timed repetition, the
    # checked output and the side-stream check at once
    window = None
    if x.get("expect_very_slow"):
        window = sidestream.trace_one(
            cand, runner.library.marker, stream, keep=trace_path, before=lambda: bench.refill(0)
        )
        runner.synchronize()
    first_ms = window.event_ms if window is not None else None
    cand_t = timing.timed(cand, bench.refill, stream, reps, trials, warmup, budget, *slow, first_ms=first_ms)
    runner.synchronize()
    phases["timing_s"] = time.perf_counter() - t0
    very_slow = cand_t.plan is not None and cand_t.plan.rule == "very slow"
    s = cand_t.summary
    tm = Timing(
        median_ms=s.median_ms,
        min_ms=s.min_ms,
        max_ms=s.max_ms,
        trials=s.trials,
        reps_per_trial=s.reps_per_trial,
        shape=dict(bindings),
        extra={
            "trial_medians_ms": s.trial_medians_ms,
            "reduced_reps": cand_t.reduced,
            "timing_rule": cand_t.plan.rule if cand_t.plan else "default",
            "estimate_ms": round(cand_t.estimate_ms, 4),
            "l2_flush_bytes": bench.flush.numel(),
            "input_sets": len(bench.pool),
            "stream": "dedicated torch.cuda.Stream",
            "device": torch.cuda.get_device_name(device),
        },
    )

    def outcome(category: str = "ok", message: str = "") -> ProfileOutcome:
        tm.extra["profile_s"] = round(time.perf_counter() - t0, 3)
        tm.extra["phases_s"] = {k: round(v, 4) for k, v in phases.items()}
        return ProfileOutcome(category, message, asdict(tm), profile)

    breach = bench.breach()
    if breach is not None:
        return outcome("out_of_bounds", breach)
    t_v = time.perf_counter()
    # a very slow kernel's one timed launch is checked itself; anything timed over many
    # repetitions is checked by one more launch on a set it has never seen, which is also the
    # launch the CUPTI window traces when the first look was not (one launch for both checks)
    if very_slow:
        stale = timing.check_timed_launch(bench)
    elif window is not None:
        stale = timing.verify_after_timing(runner, bench, stream)
    else:
        fresh: dict[str, Any] = {}
        window = sidestream.trace_one(
            cand,
            runner.library.marker,
            stream,
            keep=trace_path,
            before=lambda: fresh.update(timing.refill_verify_set(bench, stream)),
        )
        runner.synchronize()
        stale = timing.check_verify_set(bench, fresh)
    phases["verify_s"] = time.perf_counter() - t_v
    if stale is not None:
        return outcome("mismatch", stale)
    t_c = time.perf_counter()

    if window is None:  # a very slow kernel not expected so: its timed launch was not traced
        window = sidestream.trace_one(cand, runner.library.marker, stream, keep=trace_path)
        runner.synchronize()
    tm.extra["launches_after_correctness"] = _launches(cand_t, traced_first=first_ms is not None)
    profile["cupti"] = window.to_dict()
    phases["cupti_s"] = time.perf_counter() - t_c
    if window.traced:
        tm.cupti_kernel_ms = window.kernel_ms
    if not window.ok and not x.get("skip_side_stream"):
        return outcome("side_stream", window.message())

    # the torch baseline, timed the same way on the same live tensors; `skip_reference`: a
    # materializer's candidates (judged against their line's head, not torch), whose run times the
    # baseline once, with its start kernel
    t_r = time.perf_counter()
    if x.get("skip_reference"):
        tm.extra["reference"] = "skipped"
    else:
        _time_reference(bench, tm, s.median_ms, workload, stream, (reps, trials, warmup, budget, *slow))
        torch.cuda.synchronize(device)
    phases["reference_s"] = time.perf_counter() - t_r

    # speed of light
    ceil = sol.ceilings(overrides=x.get("sol_ceilings"))
    nbytes = workload.bytes_moved(bindings)
    flops = workload.flops(bindings) if workload.flops else None
    b = sol.bound(nbytes, flops, ceil, workload.dtypes)
    tm.bandwidth_fraction, tm.flops_fraction = sol.fractions(
        s.median_ms, nbytes, flops, ceil, workload.dtypes
    )
    tm.extra["sol"] = {
        "floor_ms": b.floor_ms,
        "limiter": b.limiter,
        "bytes_moved": nbytes,
        "flops": flops,
        "copy_tb_s": ceil.copy_bytes_per_s / 1e12,
        "matmul_tflops": {k: v / 1e12 for k, v in ceil.matmul_flops_per_s.items()},
    }
    margin = float(x.get("sol_margin", sol.DEFAULT_MARGIN))
    if sol.is_suspicious(s.median_ms, b, margin):
        return outcome("suspicious", sol.describe(s.median_ms, b, ceil))

    if options.ncu:
        profile["ncu"] = _ncu(runner, workload, bindings, options, art)
    if options.energy:
        try:
            from klineage.gates.cuda import energy

            profile["energy"] = energy.measure(
                cand,
                stream.synchronize,
                s.median_ms,
                device.index or 0,
                seconds=float(x.get("energy_seconds", 1.0)),
            )
        except Exception as e:  # noqa: BLE001 - NVML missing: report, do not reject
            profile["energy"] = {"error": f"{type(e).__name__}: {e}"}
    return outcome()


def _launches(t: timing.Timed, traced_first: bool) -> int:
    """How many launches of the candidate the profile stage made (GPU time a gate holds): what
    `timed` made, the traced first look when the caller took it, and one more (a very slow
    kernel's trace unless its one launch was traced; else the verify launch, traced or not)."""
    if t.plan is not None and t.plan.rule == "very slow":
        return t.launches + 1  # the traced launch was the timed one, or the trace came after it
    return t.launches + (1 if traced_first else 0) + 1


def _time_reference(
    bench: Any, tm: Timing, cand_ms: float, workload: Workload, stream: Any, plan: tuple[Any, ...]
) -> None:
    """The torch vendor function (else the reference) timed like the candidate, into `tm`."""
    try:
        ref_t = timing.timed(bench.vendor_call(), bench.refill, stream, *plan).summary
        tm.reference_median_ms, tm.reference_min_ms, tm.reference_max_ms = (
            ref_t.median_ms,
            ref_t.min_ms,
            ref_t.max_ms,
        )
        tm.extra["reference"] = "vendor" if workload.vendor else "reference"
        tm.extra["reference_trial_medians_ms"] = ref_t.trial_medians_ms
        tm.extra["speedup_vs_torch"] = stats.speedup(ref_t.median_ms, cand_ms)
    except Exception as e:  # noqa: BLE001 - a baseline that fails must not reject the candidate
        tm.extra["reference_error"] = f"{type(e).__name__}: {e}"


def _ncu(
    runner: CudaRunner, workload: Workload, bindings: dict[str, int], options: GateOptions, art: Path | None
) -> dict[str, Any]:
    from klineage.gates.cuda import ncu

    if workload.source_dir is None:
        return {"skipped": "workload has no folder for the probe process"}
    probe = probe_command(runner.library.path, workload.source_dir, bindings, profile_range=True)
    r = ncu.run(probe, _tool_timeout(options, 0.4), exclude=(MARKER_KERNEL,))
    if art is not None:
        (art / "ncu_output.txt").write_text(" ".join(r.command) + "\n" + r.output)
    if r.summary is None:
        tail = [ln for ln in r.output.splitlines() if ln.strip()][-4:]
        return {"error": f"ncu gave no metrics (exit {r.returncode})", "tail": tail}
    return r.summary.to_dict()
