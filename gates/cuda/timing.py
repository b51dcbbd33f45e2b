"""Timing on the GPU that a skeptical kernel engineer can trust (child process).

Each repetition: refill the inputs in place (same pointers, values from a pool of pre-generated
sets, so an output cached by input pointer is stale), flush L2 with a write over at least twice
its size, then CUDA events around the launch alone, all on the launch stream with no host
synchronization inside the window. Warm-up first; trials of many repetitions; the statistics are
in gates/cuda/stats.py. After timing, one more launch on a set never used before is compared with
the reference: a candidate that skipped work during the timed runs fails there.
The torch vendor function (or the reference) is timed the same way in the same process.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import torch

from klineage.gates.cuda.runner import CudaRunner
from klineage.gates.cuda.stats import SLOW_BUDGET_S, SLOW_MS, Plan, Summary, plan_timing, summarize
from klineage.gates.protocol import Guarded, accumulation_allowance, compare, device_inputs, guarded
from klineage.workload import Scalar, Workload

DEFAULT_REPS = 50
DEFAULT_TRIALS = 3
DEFAULT_WARMUP = 5
DEFAULT_SETS = 3
#: seeds of the timing pool and of the check after timing; the protocol uses small seeds (0, 1)
POOL_SEED = 9100
VERIFY_SEED = 9999


def l2_bytes(device: torch.device) -> int:
    props = torch.cuda.get_device_properties(device)
    return int(getattr(props, "L2_cache_size", 0) or 60 * 2**20)


def flush_buffer(device: torch.device) -> torch.Tensor:
    """A buffer of at least twice the L2 size: writing it evicts every line the kernel could reuse."""
    return torch.empty(max(2 * l2_bytes(device), 64 * 2**20), dtype=torch.uint8, device=device)


@dataclass
class Timed:
    summary: Summary
    reduced: bool = False
    plan: Plan | None = None
    estimate_ms: float = 0.0
    #: launches `timed` made (its first look unless the caller took it, the estimate, the plan's)
    launches: int = 0


class Bench:
    """Live argument tensors at one shape (fixed pointers, guard zones around each) and a pool of
    value sets for them. Set 0 comes from the workload's generator; the others are that set
    rolled by different offsets on the device (floating tensors only: integer tensors may be
    indices whose values must stay put), so big bench shapes cost one host generation."""

    def __init__(
        self, workload: Workload, bindings: Mapping[str, int], device: torch.device, sets: int = DEFAULT_SETS
    ) -> None:
        self.workload = workload
        self.bindings = dict(bindings)
        self.device = device
        first = self._device_inputs(POOL_SEED)
        self.pool = [first] + [self._rolled(first, k) for k in range(1, max(2, sets))]
        self.guards: dict[str, Guarded] = {}
        self.live: dict[str, torch.Tensor] = {}
        self.outputs: dict[str, torch.Tensor] = {}
        self.values: list[Any] = []
        for a in workload.args:
            if isinstance(a, Scalar):
                self.values.append(first[a.name])
                continue
            shape = workload.tensor_shape(a, self.bindings)
            if a.is_read:
                g = guarded(shape, a.torch_dtype, device, data=first[a.name])
                self.live[a.name] = g.tensor
            else:
                g = guarded(shape, a.torch_dtype, device, pattern=0xFF)
            self.guards[a.name] = g
            if a.is_checked:
                self.outputs[a.name] = g.tensor
            self.values.append(g.tensor)
        self.flush = flush_buffer(device)

    def _device_inputs(self, seed: int) -> dict[str, Any]:
        return device_inputs(self.workload, self.bindings, seed, self.device)

    @staticmethod
    def _rolled(base: dict[str, Any], k: int) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for name, v in base.items():
            if isinstance(v, torch.Tensor) and v.dtype.is_floating_point and v.numel() > 1:
                shift = 1 + (k * 7919) % (v.numel() - 1)
                out[name] = torch.roll(v.reshape(-1), shift).reshape(v.shape)
            else:
                out[name] = v
        return out

    def refill(self, i: int) -> None:
        """Copy value set i (mod pool) into the live tensors, then flush L2; stream-ordered."""
        src = self.pool[i % len(self.pool)]
        for name, t in self.live.items():
            t.copy_(src[name], non_blocking=True)
        self.flush.fill_(i & 0x7F)

    def breach(self) -> str | None:
        """A write outside any argument tensor during the timed runs, in words, or None."""
        for name, g in self.guards.items():
            b = g.breach()
            if b:
                return f"the kernel wrote to '{name}' at {b} (timed runs at shape {self.bindings})"
        return None

    def vendor_call(self) -> Callable[[], Any]:
        """The torch baseline on the live inputs: workload.vendor, else the reference."""
        fn = self.workload.vendor or self.workload.reference
        kwargs = self.workload.read_kwargs({**self.pool[0], **self.live})  # scalars of set 0, live tensors
        return lambda: fn(**kwargs)


def time_reps(
    step: Callable[[], Any],
    before: Callable[[int], None],
    stream: torch.cuda.Stream,
    reps: int,
    trials: int,
    warmup: int,
) -> list[list[float]]:
    """Per-repetition times (ms) of `step`, trial by trial. `before(i)` runs outside the events;
    the host waits only once per trial, after every repetition is enqueued."""
    with torch.cuda.stream(stream):
        for w in range(warmup):
            before(w)
            step()
        stream.synchronize()
        out: list[list[float]] = []
        i = 0
        for _ in range(trials):
            starts = [torch.cuda.Event(enable_timing=True) for _ in range(reps)]
            ends = [torch.cuda.Event(enable_timing=True) for _ in range(reps)]
            for r in range(reps):
                before(i)
                i += 1
                starts[r].record(stream)
                step()
                ends[r].record(stream)
            ends[-1].synchronize()
            out.append([s.elapsed_time(e) for s, e in zip(starts, ends, strict=True)])
    return out


def one_launch_ms(step: Callable[[], Any], before: Callable[[int], None], stream: torch.cuda.Stream) -> float:
    """One repetition's time (refilled, L2 flushed), no warm-up: the timing rule's first look."""
    return time_reps(step, before, stream, reps=1, trials=1, warmup=0)[0][0]


def timed(
    step: Callable[[], Any],
    before: Callable[[int], None],
    stream: torch.cuda.Stream,
    reps: int = DEFAULT_REPS,
    trials: int = DEFAULT_TRIALS,
    warmup: int = DEFAULT_WARMUP,
    budget_s: float = 30.0,
    slow_ms: float = SLOW_MS,
    slow_budget_s: float = SLOW_BUDGET_S,
    first_ms: float | None = None,
) -> Timed:
    """Estimate one launch, plan the trials by the timing rule (stats.plan_timing), time them.

    A very slow kernel's plan is one trial of one repetition: its first timed launch here
    (refilled with set 0, L2 flushed; the correctness stage has already launched it, so nothing
    is cold but what a launch of seconds does not notice) is that repetition, kept rather than
    paid again with a warm-up and an estimate (a naive start kernel of seconds a launch held the
    GPU four times that long). A slow kernel's first look (tens of milliseconds or more a
    launch) is also its estimate and its warm-up: a second launch would only repeat it, and the
    trials follow at once. Anything faster is estimated from a second launch, the first having
    served as its warm-up. `first_ms`: that first look, already taken by the caller the same way
    (the profile stage takes it under the CUPTI trace when it expects a very slow kernel, so the
    one launch is also the side-stream check)."""
    made = 0 if first_ms is not None else 1
    first = one_launch_ms(step, before, stream) if first_ms is None else first_ms
    plan = plan_timing(first, reps, trials, warmup, budget_s, slow_ms, slow_budget_s)
    if plan.rule == "very slow":
        return Timed(summarize([[first]]), plan.reduced, plan, first, made)
    if plan.rule == "slow":
        est = first
    else:
        est = one_launch_ms(step, before, stream)
        made += 1
        plan = plan_timing(est, reps, trials, warmup, budget_s, slow_ms, slow_budget_s)
    summary = summarize(time_reps(step, before, stream, plan.reps, plan.trials, plan.warmup))
    return Timed(summary, plan.reduced, plan, est, made + plan.warmup + plan.reps * plan.trials)


def verify_after_timing(runner: CudaRunner, bench: Bench, stream: torch.cuda.Stream) -> str | None:
    """Refill with a set never used before (same pointers), launch once, compare with the
    reference. Returns a rejection message, or None when the outputs are right."""
    fresh = refill_verify_set(bench, stream)
    with torch.cuda.stream(stream):
        runner.launch_async(bench.values, stream.cuda_stream)
    runner.synchronize()
    return check_verify_set(bench, fresh)


def refill_verify_set(bench: Bench, stream: torch.cuda.Stream) -> dict[str, Any]:
    """The first half of `verify_after_timing`: a set never used before copied into the live
    inputs (same pointers), outputs poisoned, all finished before the launch whatever stream the
    launcher really uses (this check is about values; stream discipline is the CUPTI window
    check's job). Returns the set, for `check_verify_set` after the one launch."""
    fresh = bench._device_inputs(VERIFY_SEED)
    with torch.cuda.stream(stream):
        for name, t in bench.live.items():
            t.copy_(fresh[name])
        live = {x.data_ptr() for x in bench.live.values()}
        for t in bench.outputs.values():
            if t.data_ptr() not in live:
                t.reshape(-1).view(torch.uint8).fill_(0xFF)  # reshape: 0-dim outputs
    stream.synchronize()
    return fresh


def check_verify_set(bench: Bench, fresh: dict[str, Any]) -> str | None:
    """The second half of `verify_after_timing`, after the launch has finished."""
    return _wrong_output(
        bench,
        fresh,
        "after the timed repetitions (inputs refilled in place with new values)",
        "the kernel skipped work or returned a cached result (keyed by input pointer?)",
    )


def check_timed_launch(bench: Bench) -> str | None:
    """The outputs of a very slow kernel's one timed launch (value set 0, outputs poisoned since
    the bench was made) compared with the reference: that launch is checked itself, so no
    further launch of seconds is paid to verify it. Call right after timing, before any other
    launch. Returns a rejection message, or None."""
    torch.cuda.synchronize(bench.device)
    return _wrong_output(
        bench, bench.pool[0], "in the timed launch", "the kernel skipped work at the bench shape"
    )


def _wrong_output(bench: Bench, inputs: dict[str, Any], when: str, why: str) -> str | None:
    """The first output of the bench that differs from the reference on `inputs`, in words."""
    expected = bench.workload.run_reference(inputs)
    for t in bench.workload.outputs:
        allowance = accumulation_allowance(bench.workload, t, inputs, bench.bindings)
        ok, max_abs, _, idx = compare(
            bench.outputs[t.name], expected[t.name], bench.workload.tolerance_for(t), allowance
        )
        if not ok:
            return (
                f"output '{t.name}' is wrong {when}: first bad index {idx}, max abs err "
                f"{max_abs:.3g} at shape {bench.bindings}; {why}"
            )
    return None
