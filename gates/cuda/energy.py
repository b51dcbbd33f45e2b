"""Energy per call from NVML (`--energy`): the board's energy counter over many back-to-back
launches (power samples integrated over time where the counter is missing).

Whole-board energy includes idle power; the idle draw measured just before is reported too, so a
reader can subtract it. The arithmetic (`integrate`) is pure and CPU-tested.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from typing import Any


def integrate(samples: Sequence[tuple[float, float]]) -> float:
    """Joules from (seconds, watts) samples by the trapezoid rule."""
    total = 0.0
    for (t0, w0), (t1, w1) in zip(samples, samples[1:], strict=False):
        total += 0.5 * (w0 + w1) * max(0.0, t1 - t0)
    return total


def calls_for(seconds: float, per_call_ms: float, floor: int = 20, cap: int = 200_000) -> int:
    """Launches that keep the board busy for about `seconds`."""
    if per_call_ms <= 0:
        return floor
    return max(floor, min(cap, int(seconds * 1000.0 / per_call_ms)))


def measure(
    step: Callable[[], Any],
    sync: Callable[[], None],
    per_call_ms: float,
    device_index: int = 0,
    seconds: float = 1.0,
    period_s: float = 0.005,
) -> dict[str, Any]:
    """Run `step` back to back for about `seconds`; joules per call from NVML."""
    import pynvml

    pynvml.nvmlInit()
    try:
        h = pynvml.nvmlDeviceGetHandleByIndex(device_index)
        idle_w = pynvml.nvmlDeviceGetPowerUsage(h) / 1000.0
        samples: list[tuple[float, float]] = []
        stop = threading.Event()

        def sampler() -> None:
            while not stop.is_set():
                samples.append((time.perf_counter(), pynvml.nvmlDeviceGetPowerUsage(h) / 1000.0))
                time.sleep(period_s)

        try:
            e0 = pynvml.nvmlDeviceGetTotalEnergyConsumption(h)
        except pynvml.NVMLError:
            e0 = None
        n = calls_for(seconds, per_call_ms)
        thread = threading.Thread(target=sampler, daemon=True)
        sync()
        t0 = time.perf_counter()
        thread.start()
        for _ in range(n):
            step()
        sync()
        t1 = time.perf_counter()
        stop.set()
        thread.join()
        e1 = pynvml.nvmlDeviceGetTotalEnergyConsumption(h) if e0 is not None else None
    finally:
        pynvml.nvmlShutdown()
    if e0 is not None and e1 is not None and e1 > e0:
        joules, method = (e1 - e0) / 1000.0, "nvml energy counter"
    else:
        joules, method = integrate(samples), "nvml power samples"
    seconds_run = t1 - t0
    return {
        "joules_per_call": joules / n,
        "calls": n,
        "seconds": seconds_run,
        "mean_watts": joules / seconds_run if seconds_run > 0 else None,
        "idle_watts_before": idle_w,
        "samples": len(samples),
        "method": method,
    }
