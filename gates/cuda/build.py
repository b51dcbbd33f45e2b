"""Build a candidate into a shared library that ctypes can load (parent process, nvcc).

The candidate (`kernel.cu`, the name the gate maps back to the user's file) and the support file
(gates/cuda/support.py) are linked by one nvcc call, so both share the library's statically
linked CUDA runtime: the support functions can read the launcher's launch errors. The support
file is the same for every candidate, so it is compiled once per toolchain, architecture and
flags into an object file kept under the KLineage home (`support_object`), and each build
compiles the candidate alone (about a third of a build's nvcc time saved); without that object
(it would not build, or no home to keep it) both sources are compiled together as before.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import shutil
import subprocess
import threading
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


#: compile flags of the support object: what LIBRARY_FLAGS gives a source, without linking
OBJECT_FLAGS = ("-Xcompiler", "-fPIC", "-lineinfo", "-c")
_support_lock = threading.Lock()


def support_object(nvcc: str, arch: str, flags: Sequence[str], timeout_s: float) -> Path | None:
    """The support file compiled once for this nvcc, architecture and flags (kept under the
    KLineage home, keyed by all of them and the support source), or None when it cannot be."""
    key = hashlib.sha256(
        "\0".join([nvcc_identity(), os.path.realpath(nvcc), arch, *flags, SUPPORT_SOURCE]).encode()
    ).hexdigest()[:20]
    try:
        from klineage.paths import home

        folder = home() / "cuda-support" / key
    except OSError:
        return None
    obj = folder / "klineage_support.o"
    if obj.is_file():
        return obj
    with _support_lock:  # one compile per process; other processes may race: the rename is atomic
        if obj.is_file():
            return obj
        try:
            folder.mkdir(parents=True, exist_ok=True)
            tmp = folder / f".build-{os.getpid()}"
            tmp.mkdir(exist_ok=True)
            (tmp / SUPPORT_FILENAME).write_text(SUPPORT_SOURCE)
            cmd = [nvcc, *flags, *arch_flags(arch), *OBJECT_FLAGS, "-o", "support.o", SUPPORT_FILENAME]
            proc = subprocess.run(cmd, cwd=tmp, capture_output=True, timeout=timeout_s, check=False)
            if proc.returncode != 0:
                return None
            os.replace(tmp / "support.o", obj)
        except (OSError, subprocess.TimeoutExpired):
            return None
        finally:
            with contextlib.suppress(OSError):
                shutil.rmtree(folder / f".build-{os.getpid()}")
    return obj


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
    support = support_object(nvcc, options.arch, options.nvcc_flags, options.timeout_s)
    if support is not None:
        cmd = nvcc_command(nvcc, options.arch, options.nvcc_flags, (SOURCE_NAME, str(support)))
    else:
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
