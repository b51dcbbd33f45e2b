"""Build a candidate into a shared library that ctypes can load (parent process, nvcc).

The candidate (`kernel.cu`, the name the gate maps back to the user's file) and the support file
(gates/cuda/support.py) are compiled in one nvcc call, so both share the library's statically
linked CUDA runtime: the support functions can read the launcher's launch errors.
"""

from __future__ import annotations

import shutil
import subprocess
import time
from collections.abc import Sequence
from pathlib import Path

from klineage.gates.backend import BuildOutcome, GateOptions
from klineage.gates.compile import arch_flags, first_error, nvcc_version
from klineage.gates.cuda.support import SUPPORT_FILENAME, SUPPORT_SOURCE

SOURCE_NAME = "kernel.cu"
LIBRARY_NAME = "libcandidate.so"
#: flags the library needs whatever the user's flags are: position-independent, shared, and
#: line info so compute-sanitizer and ncu can name the kernel's source line
LIBRARY_FLAGS = ("-Xcompiler", "-fPIC", "-shared", "-lineinfo")


def nvcc_command(
    nvcc: str,
    arch: str,
    flags: Sequence[str],
    sources: Sequence[str] = (SOURCE_NAME, SUPPORT_FILENAME),
    output: str = LIBRARY_NAME,
) -> list[str]:
    """The full command line; user flags first so the library flags cannot be overridden away."""
    return [nvcc, *flags, *arch_flags(arch), *LIBRARY_FLAGS, "-o", output, *sources]


def nvcc_identity() -> str:
    """'nvcc 13.0.88' (or '' when nvcc is missing) for the gate's cache key."""
    version = nvcc_version()
    return f"nvcc {version}" if version else ""


def exports_launch(library: Path) -> bool | None:
    """Does the library export a C `launch` symbol? None when `nm` is unavailable."""
    nm = shutil.which("nm")
    if not nm:
        return None
    out = subprocess.run(
        [nm, "-D", "--defined-only", str(library)], capture_output=True, text=True, check=False
    )
    if out.returncode != 0:
        return None
    return any(ln.split()[-1:] == ["launch"] for ln in out.stdout.splitlines())


def build(source: str, workdir: Path, options: GateOptions) -> BuildOutcome:
    """Compile `source` and the support file into `workdir/libcandidate.so` with a time limit."""
    nvcc = shutil.which("nvcc")
    if not nvcc:
        return BuildOutcome(
            False, "unsupported", "nvcc not found on PATH: the cuda backend needs the CUDA toolkit"
        )
    workdir.mkdir(parents=True, exist_ok=True)
    (workdir / SOURCE_NAME).write_text(source)
    (workdir / SUPPORT_FILENAME).write_text(SUPPORT_SOURCE)
    cmd = nvcc_command(nvcc, options.arch, options.nvcc_flags)
    t0 = time.perf_counter()
    try:
        proc = subprocess.run(
            cmd, cwd=workdir, capture_output=True, text=True, timeout=options.timeout_s, check=False
        )
    except subprocess.TimeoutExpired:
        return BuildOutcome(
            False,
            "compile_error",
            f"nvcc timed out after {options.timeout_s:g} s",
            elapsed_s=time.perf_counter() - t0,
        )
    log = " ".join(cmd) + "\n" + proc.stdout + proc.stderr
    (workdir / "build.log").write_text(log)
    elapsed = time.perf_counter() - t0
    if proc.returncode != 0:
        return BuildOutcome(
            False, "compile_error", first_error(proc.stdout + proc.stderr), log=log, elapsed_s=elapsed
        )
    library = workdir / LIBRARY_NAME
    if exports_launch(library) is False:
        return BuildOutcome(
            False,
            "compile_error",
            f'{SOURCE_NAME}: no extern "C" launch(...) exported by the library',
            log=log,
            elapsed_s=elapsed,
        )
    return BuildOutcome(True, "ok", "", library=library, log=log, elapsed_s=elapsed)
