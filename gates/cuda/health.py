"""The device side of a resident worker's health check (gates/health.py), for the `cuda` backend.

`warm_up` starts what a candidate's run starts lazily (the context, cuBLAS, CUPTI, the measured
speed-of-light ceilings), so that the baseline holds it. `device_state` reads what a candidate
could leave changed: a sticky error (the context is dead after an illegal address or a trap),
the current context and device, every context limit (stack, printf FIFO, malloc heap, device
runtime depths, L2 fetch granularity, persisting L2 size), the cache configuration and the
context flags (through the driver API, which sees what the candidate's own runtime set), and
the device memory free beside what torch's allocator holds.
"""

from __future__ import annotations

import ctypes
import tempfile
from pathlib import Path
from typing import Any

#: CUlimit values of the driver API, by name
LIMITS = {
    "stack_size": 0,
    "printf_fifo_size": 1,
    "malloc_heap_size": 2,
    "dev_runtime_sync_depth": 3,
    "dev_runtime_pending_launch_count": 4,
    "max_l2_fetch_granularity": 5,
    "persisting_l2_cache_size": 6,
}

_driver: Any = None


def driver() -> Any:
    global _driver
    if _driver is None:
        _driver = ctypes.CDLL("libcuda.so.1")
    return _driver


def context_settings() -> dict[str, Any]:
    """Current context, device, limits, cache config and flags, read through the driver API
    (a value the driver refuses to give is left out, the same way every time)."""
    cu = driver()
    out: dict[str, Any] = {}
    ctx = ctypes.c_void_p()
    if cu.cuCtxGetCurrent(ctypes.byref(ctx)) == 0:
        out["context"] = ctx.value or 0
    dev = ctypes.c_int()
    if cu.cuCtxGetDevice(ctypes.byref(dev)) == 0:
        out["device"] = dev.value
    for name, code in LIMITS.items():
        value = ctypes.c_size_t()
        if cu.cuCtxGetLimit(ctypes.byref(value), ctypes.c_int(code)) == 0:
            out[f"limit.{name}"] = value.value
    cfg = ctypes.c_int()
    if cu.cuCtxGetCacheConfig(ctypes.byref(cfg)) == 0:
        out["cache_config"] = cfg.value
    flags = ctypes.c_uint()
    if cu.cuCtxGetFlags(ctypes.byref(flags)) == 0:
        out["context_flags"] = flags.value
    return out


def free_bytes() -> int:
    """Free device memory now, as the driver counts it (cheap: no synchronization, nothing freed)."""
    import torch

    return int(torch.cuda.mem_get_info()[0])


def device_state() -> dict[str, Any]:
    import torch

    try:
        torch.cuda.synchronize()
        probe = torch.ones(1, device="cuda").add_(1)
        if float(probe.item()) != 2.0:
            return {"error": "a tiny add on the device gave a wrong result"}
        del probe
        torch.cuda.empty_cache()
        free, _total = torch.cuda.mem_get_info()
    except Exception as e:  # noqa: BLE001 - a sticky error: every CUDA call now fails
        return {"error": " ".join(f"{type(e).__name__}: {e}".split())[:300]}
    return {
        "free_bytes": int(free),
        "reserved_bytes": int(torch.cuda.memory_reserved()),
        "torch_device": torch.cuda.current_device(),
        **context_settings(),
    }


def warm_up() -> None:
    import torch
    from torch.profiler import ProfilerActivity, profile

    from klineage.gates.cuda import sol

    if not torch.cuda.is_available():
        raise RuntimeError("no CUDA GPU visible to torch")
    dev = torch.device("cuda", torch.cuda.current_device())
    for dtype in (torch.float32, torch.bfloat16, torch.float16):  # cuBLAS / cuBLASLt handles and workspaces
        a = torch.randn(256, 256, device=dev, dtype=dtype)
        (a @ a).sum().item()
    stream = torch.cuda.Stream(dev)
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof, torch.cuda.stream(stream):
        start.record(stream)
        a.mul_(2)
        end.record(stream)
        torch.cuda.synchronize()
    with tempfile.TemporaryDirectory() as tmp:
        prof.export_chrome_trace(str(Path(tmp) / "trace.json"))
    sol.ceilings()
    del a
    torch.cuda.synchronize()
    torch.cuda.empty_cache()
