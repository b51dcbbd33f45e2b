"""The `emu` gate backend (gates/backend.py's Backend, as a module): CUDA C++ on the CPU.

build(): tree-sitter rewrite (gates/emu/rewrite.py) then one g++ call against the cached runtime.
make_runner(): loads the library in the gate's child process; each launch selects the thread
schedule (0 forward, 1 reverse) so the protocol's two runs also compare two interleavings.
"""

from __future__ import annotations

import os
import subprocess
import time
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

from klineage.gates.backend import BuildOutcome, GateOptions, ProfileOutcome
from klineage.gates.emu import compile as emu_compile
from klineage.gates.emu.failures import classify

if TYPE_CHECKING:
    from klineage.workload import Workload

NAME = "emu"
DEFAULT_SHAPE_SET = "emu"


def toolchain() -> str:
    return (
        f"{emu_compile.compiler_version()} + klemu {emu_compile.runtime_hash()}"
        f" + translator {emu_compile.translator_hash()}"
    )


def _source_name(options: GateOptions) -> str:
    return str(options.extra.get("source_name", "kernel.cu")).rsplit("/", 1)[-1]


def build(source: str, workdir: Path, options: GateOptions) -> BuildOutcome:
    """Translate and compile `source`; unsupported constructs are refused before compiling."""
    t0 = time.monotonic()
    workdir = Path(workdir)
    workdir.mkdir(parents=True, exist_ok=True)
    name = _source_name(options)
    (workdir / name).write_text(source)
    from klineage.gates.emu.rewrite import Unsupported, translate  # tree-sitter: only to build

    try:
        tr = translate(source, name)
    except Unsupported as e:
        return BuildOutcome(False, "unsupported", str(e), elapsed_s=time.monotonic() - t0)
    cpp = workdir / (Path(name).stem + ".emu.cpp")
    cpp.write_text(tr.text)
    lib = workdir / ("libkernel_asan.so" if options.sanitize else "libkernel.so")
    opt = str(options.extra.get("emu_opt", "-O1"))
    try:
        res = emu_compile.compile_kernel(
            cpp, lib, name, options.sanitize, timeout=min(options.timeout_s, 300), opt=opt
        )
    except (RuntimeError, OSError, subprocess.SubprocessError) as e:
        return BuildOutcome(False, "compile_error", f"emu runtime: {e}", elapsed_s=time.monotonic() - t0)
    if not res.ok:
        return BuildOutcome(False, "compile_error", res.message, log=res.log, elapsed_s=time.monotonic() - t0)
    return BuildOutcome(True, "ok", "", library=lib, log=res.log, elapsed_s=time.monotonic() - t0)


def make_runner(library: Path, workload: Workload, options: GateOptions) -> Any:
    from klineage.gates.emu.runner import EmuRunner  # torch: only where a candidate runs

    return EmuRunner(Path(library), workload, sanitize=options.sanitize)


def profile(runner: Any, workload: Workload, options: GateOptions) -> ProfileOutcome | None:
    """The emulator reports no timing (DESIGN.md); it names the kernel instantiations launched."""
    launched = sorted(getattr(runner, "launched", ()))
    return ProfileOutcome(profile={"launched": launched}) if launched else None


def classify_failure(returncode: int, stderr: str) -> tuple[str, str] | None:
    return classify(returncode, stderr)


@lru_cache(maxsize=1)
def _libasan() -> str:
    try:
        out = subprocess.run(
            [emu_compile.CXX, "-print-file-name=libasan.so"], capture_output=True, text=True, timeout=30
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return ""
    return out if out and os.path.isabs(out) and os.path.exists(out) else ""


ASAN_OPTIONS = (
    "detect_leaks=0:halt_on_error=1:abort_on_error=0:exitcode=87:detect_stack_use_after_return=0:"
    "detect_odr_violation=0:verify_asan_link_order=0:allocator_may_return_null=1:symbolize=1:"
    "handle_segv=1:print_summary=1:detect_container_overflow=0"
)


def launch_cpu_limit(options: GateOptions) -> float:
    """CPU seconds one launch may use before the runtime reports a timeout naming where it
    spins (an eighth of the gate's limit: the protocol makes a dozen launches and more)."""
    return max(1.0, float(options.timeout_s) / 8.0)


def child_env(options: GateOptions) -> dict[str, str]:
    """The launch watchdog's limit; for sanitized builds ASan preloaded (it must come first)."""
    env = {"KLEMU_LAUNCH_CPU_S": f"{launch_cpu_limit(options):g}"}
    if not options.sanitize:
        return env
    env["ASAN_OPTIONS"] = ASAN_OPTIONS
    lib = _libasan()
    if lib:
        env["LD_PRELOAD"] = lib
    return env
