"""Is a resident gate worker (gates/resident.py) still as it was after its warm-up?

A child per candidate starts clean; a resident worker must prove it is. After every candidate
it takes a snapshot of what a candidate could leave behind and compares it with the snapshot
taken after warm-up: host threads still running (a launcher that started a thread), and,
from the backend (`device_state`, optional), the device: a broken context (a sticky fault),
device memory left allocated, a changed limit or cache setting. Any difference retires the
worker. `drift` is pure and CPU-tested; the snapshots read the live process.
"""

from __future__ import annotations

import os
from types import ModuleType
from typing import Any

#: device memory a worker may hold beyond its warm-up state before it counts as a leak (module
#: code of the libraries loaded so far, allocator rounding); cumulative over its candidates
LEAK_BYTES = 256 << 20
#: keys of a snapshot that are compared as amounts, not for equality
_AMOUNTS = ("threads", "free_bytes", "reserved_bytes")


def threads() -> int:
    """Threads of this process, as the kernel counts them (threads started by C code too)."""
    try:
        return len(os.listdir("/proc/self/task"))
    except OSError:
        import threading

        return threading.active_count()


def warm_up(backend: ModuleType) -> None:
    """Start everything a candidate's run starts lazily (the CPU thread pool; the backend's own
    warm-up: the CUDA context, cuBLAS, CUPTI), so the baseline snapshot already holds it."""
    import torch

    a = torch.randn(1 << 20, dtype=torch.float64)
    float((a - a.flip(0)).abs().max())  # a parallel CPU op: the OpenMP pool the protocol's compare uses
    hook = getattr(backend, "warm_up", None)
    if hook is not None:
        hook()


def snapshot(backend: ModuleType) -> dict[str, Any]:
    state: dict[str, Any] = {"threads": threads()}
    device_state = getattr(backend, "device_state", None)
    if device_state is not None:
        state.update(device_state())
    return state


def free_bytes(backend: ModuleType) -> int | None:
    """Free device memory now, from the backend (`free_bytes`, optional), or None."""
    read = getattr(backend, "free_bytes", None)
    return int(read()) if read is not None else None


def rebase(baseline: dict[str, Any], previous_free: int | None, current_free: int | None) -> dict[str, Any]:
    """The baseline moved by the change of free device memory while the worker was idle, from
    the end of its last candidate (`previous_free`) to the arrival of the next (`current_free`).

    Free memory is the device's, not the process's: another resident worker on the same GPU (a
    second loop sharing it through the device lock) grows and shrinks it between this worker's
    candidates, and without this its growth was charged to this worker's candidates as memory
    left allocated (14 false retirements in one leave-one-out + held-out call on an H100, 258
    MiB to 5.4 GB, the other worker's input sets; and negative totals when it freed them). The
    device lock keeps the other process off the GPU while a candidate runs, so what changes
    during a candidate is still this worker's."""
    if previous_free is None or current_free is None or "free_bytes" not in baseline:
        return baseline
    moved = dict(baseline)
    moved["free_bytes"] += current_free - previous_free
    return moved


def held_bytes(before: dict[str, Any], after: dict[str, Any]) -> int:
    """Device memory gone between two snapshots that torch's allocator does not hold."""
    return (before["free_bytes"] - after["free_bytes"]) - (
        after.get("reserved_bytes", 0) - before.get("reserved_bytes", 0)
    )


def forgive(baseline: dict[str, Any], before: dict[str, Any], after: dict[str, Any]) -> dict[str, Any]:
    """The baseline moved by what the worker's own work between `before` and `after` took (the
    device memory torch's lazily loaded kernel modules take at a workload's first reference and
    vendor calls, threads a library's first use starts), and by nothing a candidate did: that
    work runs before any candidate code of the workload. Amounts only; a changed setting stays a
    difference."""
    moved = dict(baseline)
    if "free_bytes" in before and "free_bytes" in after and "free_bytes" in moved:
        moved["free_bytes"] -= max(0, held_bytes(before, after))
    moved["threads"] = moved.get("threads", 0) + max(0, after.get("threads", 0) - before.get("threads", 0))
    return moved


def drift(before: dict[str, Any], after: dict[str, Any]) -> str | None:
    """Why the process is no longer as it was (`before`: after warm-up), or None."""
    if after.get("error"):
        return f"the device is unusable after the candidate: {after['error']}"
    extra = after.get("threads", 0) - before.get("threads", 0)
    if extra > 0:
        return f"the candidate left {extra} host thread{'s' if extra != 1 else ''} running"
    if "free_bytes" in before and "free_bytes" in after:
        # memory gone from the device that torch's allocator does not hold
        held = held_bytes(before, after)
        if held > LEAK_BYTES:
            return (
                f"{held / 2**20:.0f} MiB of device memory left allocated (more than {LEAK_BYTES >> 20} MiB)"
            )
    for k in sorted(set(before) | set(after)):
        if k in _AMOUNTS or k == "error":
            continue
        if before.get(k) != after.get(k):
            return f"device setting {k} changed: {before.get(k)!r} -> {after.get(k)!r}"
    return None
