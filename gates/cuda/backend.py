"""The `cuda` gate backend (gates/backend.py's interface, as a module): nvcc-built launchers called
through ctypes on torch CUDA tensors, timed and checked on the GPU (DESIGN.md, 'Backend cuda').

Profile stage order, each step a possible rejection: compute-sanitizer (`--sanitize`) → timing
at the bench shape → output check after timing (pointer-keyed caches) → CUPTI window check
(side streams, deferred work) → torch baseline → speed of light (`suspicious`) → ncu (`--ncu`) →
NVML energy (`--energy`).
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

from klineage.gates.backend import BuildOutcome, GateOptions, ProfileOutcome
from klineage.gates.cuda import build as _build

NAME = "cuda"
DEFAULT_SHAPE_SET = "test"

#: (pattern in a dead child's stderr, category, words) — first match wins
_FAILURES: tuple[tuple[str, str, str], ...] = (
    (r"illegal memory access|illegal address", "crash", "illegal memory access in the kernel"),
    (r"misaligned address", "crash", "misaligned memory access in the kernel"),
    (
        r"operation not supported on global/shared address space",
        "crash",
        "a global-only or shared-only access to an address of another space (e.g. __ldg of a register copy)",
    ),
    (r"an illegal instruction was encountered", "crash", "illegal instruction in the kernel"),
    (
        r"device-side assert|unspecified launch failure|hardware stack error|cudaErrorLaunchFailure",
        "crash",
        "the kernel faulted",
    ),
    (r"launch timed out|cudaErrorLaunchTimeout", "timeout", "the kernel ran past the watchdog"),
    (
        r"too many resources requested for launch|invalid configuration argument|cudaErrorInvalidConfiguration",
        "crash",
        "the launch configuration is invalid",
    ),
    (
        r"no kernel image is available|cudaErrorNoKernelImageForDevice|unsupported ptx version",
        "unsupported",
        "the library has no code for this GPU (arch mismatch)",
    ),
    (r"out of memory", "crash", "CUDA out of memory"),
    (
        r"no CUDA GPUs are available|CUDA driver version is insufficient|no CUDA GPU visible",
        "crash",
        "no usable GPU in the child process",
    ),
)


def toolchain() -> str:
    return _build.nvcc_identity() or "nvcc missing"


def build(source: str, workdir: Path, options: GateOptions) -> BuildOutcome:
    return _build.build(source, workdir, options)


def make_runner(library: Path, workload: Any, options: GateOptions) -> Any:
    from klineage.gates.cuda.runner import CudaRunner

    return CudaRunner(library, workload)


def classify_failure(returncode: int, stderr: str) -> tuple[str, str] | None:
    """(category, message) for a child that died without writing its verdict."""
    for pattern, category, words in _FAILURES:
        m = re.search(pattern, stderr, re.IGNORECASE)
        if m:
            line = next(
                (ln.strip() for ln in stderr.splitlines() if m.group(0).lower() in ln.lower()), m.group(0)
            )
            return category, f"{words}: {line}"
    return None


def child_env(options: GateOptions) -> dict[str, str]:
    """Lazy module loading keeps torch's start fast; no blocking launches (that would hide
    asynchronous behaviour the gate must see)."""
    env = {"CUDA_MODULE_LOADING": "LAZY", "PYTHONUNBUFFERED": "1"}
    if os.environ.get("CUDA_LAUNCH_BLOCKING"):
        env["CUDA_LAUNCH_BLOCKING"] = "0"
    return env


def warm_up() -> None:
    """A resident worker's start (gates/resident.py): context, cuBLAS, CUPTI, ceilings."""
    from klineage.gates.cuda.health import warm_up as _warm_up

    _warm_up()


def warm_up_workload(workload: Any, options: GateOptions) -> None:
    """A resident worker's first look at a workload, before any candidate of it runs: the torch
    reference and vendor at the bench shape, on the kept input sets of the timing pool and of the
    check after timing. Their first calls load torch's kernel modules lazily (device memory the
    worker's health check would otherwise charge to the candidate and retire the worker for)."""
    import torch

    from klineage.gates.cuda import timing
    from klineage.gates.cuda.profile_stage import bench_bindings
    from klineage.gates.protocol import device_inputs

    device = torch.device("cuda", torch.cuda.current_device())
    bindings = bench_bindings(workload, options)
    device_inputs(workload, bindings, timing.VERIFY_SEED, device)  # kept for the check after timing
    inputs = device_inputs(workload, bindings, timing.POOL_SEED, device)
    workload.run_reference(inputs)  # the same torch kernels on either set: one set loads them
    if workload.vendor is not None:
        workload.vendor(**workload.read_kwargs(inputs))
    del inputs
    torch.cuda.synchronize(device)


def device_state() -> dict[str, Any]:
    """What a candidate could leave changed on the device (gates/health.py compares it)."""
    from klineage.gates.cuda.health import device_state as _device_state

    return _device_state()


def free_bytes() -> int:
    """Free device memory now (the resident worker's account of other processes' use)."""
    from klineage.gates.cuda.health import free_bytes as _free_bytes

    return _free_bytes()


def profile(runner: Any, workload: Any, options: GateOptions) -> ProfileOutcome | None:
    from klineage.gates.cuda.profile_stage import run_profile

    return run_profile(runner, workload, options)
