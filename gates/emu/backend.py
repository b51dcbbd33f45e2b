"""The `emu` gate backend (gates/backend.py's Backend, as a module): CUDA C++ on the CPU.

build(): tree-sitter rewrite (gates/emu/rewrite.py) then one g++ call against the cached runtime.
make_runner(): loads the library in the gate's child process; each launch selects the thread
schedule (0 forward, 1 reverse) so the protocol's two runs also compare two interleavings.
"""

from __future__ import annotations

import ctypes
import os
import subprocess
import time
from collections.abc import Sequence
from functools import lru_cache
from pathlib import Path
from typing import Any

import torch

from klineage.gates.backend import BuildOutcome, GateOptions, ProfileOutcome
from klineage.gates.emu import compile as emu_compile
from klineage.gates.emu.failures import classify
from klineage.gates.emu.rewrite import Unsupported, translate
from klineage.gates.protocol import LaunchRejected, ctypes_args
from klineage.workload import Workload

NAME = "emu"
DEFAULT_SHAPE_SET = "emu"


def toolchain() -> str:
    return (f"{emu_compile.compiler_version()} + klemu {emu_compile.runtime_hash()}"
            f" + translator {emu_compile.translator_hash()}")


def _source_name(options: GateOptions) -> str:
    return str(options.extra.get("source_name", "kernel.cu")).rsplit("/", 1)[-1]


def build(source: str, workdir: Path, options: GateOptions) -> BuildOutcome:
    """Translate and compile `source`; unsupported constructs are refused before compiling."""
    t0 = time.monotonic()
    workdir = Path(workdir)
    workdir.mkdir(parents=True, exist_ok=True)
    name = _source_name(options)
    (workdir / name).write_text(source)
    try:
        tr = translate(source, name)
    except Unsupported as e:
        return BuildOutcome(False, "unsupported", str(e), elapsed_s=time.monotonic() - t0)
    cpp = workdir / (Path(name).stem + ".emu.cpp")
    cpp.write_text(tr.text)
    lib = workdir / ("libkernel_asan.so" if options.sanitize else "libkernel.so")
    opt = str(options.extra.get("emu_opt", "-O1"))
    try:
        res = emu_compile.compile_kernel(cpp, lib, name, options.sanitize, timeout=min(options.timeout_s, 300), opt=opt)
    except (RuntimeError, OSError, subprocess.SubprocessError) as e:
        return BuildOutcome(False, "compile_error", f"emu runtime: {e}", elapsed_s=time.monotonic() - t0)
    if not res.ok:
        return BuildOutcome(False, "compile_error", res.message, log=res.log, elapsed_s=time.monotonic() - t0)
    return BuildOutcome(True, "ok", "", library=lib, log=res.log, elapsed_s=time.monotonic() - t0)


class _AsanRegions:
    """Poisons, for ASan, the bytes of each tensor's storage outside the tensor itself.

    The protocol surrounds every tensor with readable guard zones (they catch stray writes on
    every backend); under ASan those zones are made unaddressable during the launch so that
    stray reads are reported too, with the kernel's source line.
    """

    def __init__(self) -> None:
        proc = ctypes.CDLL(None)
        try:
            self.poison = getattr(proc, "__asan_poison_memory_region")  # noqa: B009 (no name mangling)
            self.unpoison = getattr(proc, "__asan_unpoison_memory_region")  # noqa: B009
        except AttributeError:
            self.poison = self.unpoison = None
        for f in (self.poison, self.unpoison):
            if f is not None:
                f.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
                f.restype = None

    def regions(self, args: Sequence[Any]) -> list[tuple[int, int]]:
        out: list[tuple[int, int]] = []
        for v in args:
            if not isinstance(v, torch.Tensor) or v.device.type != "cpu":
                continue
            st = v.untyped_storage()
            base, size = st.data_ptr(), st.nbytes()
            lo = v.data_ptr()
            hi = lo + v.numel() * v.element_size()
            if lo > base:
                out.append((base, lo - base))
            if base + size > hi:
                out.append((hi, base + size - hi))
        return out

    def apply(self, regions: list[tuple[int, int]], on: bool) -> None:
        fn = self.poison if on else self.unpoison
        if fn is None:
            return
        for addr, n in regions:
            fn(addr, n)


class EmuRunner:
    """Calls `launch` of a built library; `schedule` picks the thread order of the run. The
    launcher gets a stream handle of its own; a launch (or async copy) on any other stream,
    the default stream included, is a `side_stream` rejection, as on the GPU."""

    device = torch.device("cpu")
    schedules: Sequence[int] = (0, 1)

    def __init__(self, library: Path, workload: Workload, sanitize: bool = False) -> None:
        self.lib = ctypes.CDLL(str(library))
        self.fn = self.lib.launch
        self.fn.restype = None
        self._set = self.lib.klemu_set_schedule
        self._set.argtypes = [ctypes.c_int]
        self._set.restype = None
        self._watch = self.lib.klemu_watch_stream
        self._watch.argtypes = [ctypes.c_void_p]
        self._watch.restype = None
        self._foreign = self.lib.klemu_foreign_launches
        self._foreign.restype = ctypes.c_int
        self._first = self.lib.klemu_foreign_first
        self._first.restype = ctypes.c_char_p
        self._n_launched = self.lib.klemu_launched_count
        self._n_launched.restype = ctypes.c_int
        self._launched_name = self.lib.klemu_launched_name
        self._launched_name.argtypes = [ctypes.c_int]
        self._launched_name.restype = ctypes.c_char_p
        self.launched: set[str] = set()  # kernel instantiations launched, over every launch
        self._stream_obj = ctypes.create_string_buffer(16)  # an address no runtime stream has
        self.stream = ctypes.addressof(self._stream_obj)
        self.workload = workload
        self.asan = _AsanRegions() if sanitize else None

    def launch(self, args: Sequence[Any], schedule: int) -> None:
        self._set(int(schedule))
        self._watch(self.stream)
        cargs = ctypes_args(self.workload, args, self.stream)
        if self.asan is None:
            self.fn(*cargs)
        else:
            regions = self.asan.regions(args)
            self.asan.apply(regions, True)
            try:
                self.fn(*cargs)
            finally:
                self.asan.apply(regions, False)
        for i in range(int(self._n_launched())):
            self.launched.add(instance_of((self._launched_name(i) or b"").decode(errors="replace")))
        foreign = int(self._foreign())
        if foreign:
            first = (self._first() or b"").decode(errors="replace")
            raise LaunchRejected(
                "side_stream",
                f"{foreign} launch{'' if foreign == 1 else 'es'} on a stream other than the launch stream "
                f"({first}, launch stream {self.stream:#x}): work on a side stream, or a launcher that ignores "
                "its cudaStream_t argument",
            )


def make_runner(library: Path, workload: Workload, options: GateOptions) -> EmuRunner:
    return EmuRunner(Path(library), workload, sanitize=options.sanitize)


def instance_of(pretty: str) -> str:
    """`k<32, false>` out of g++'s "const char* klemu::instance_name() [with auto F = k<32, false>]"
    (a kernel name as written when the launch did not name the instantiation)."""
    head, sep, rest = pretty.partition("[with auto F = ")
    return rest[:-1] if sep and rest.endswith("]") else pretty


def profile(runner: Any, workload: Workload, options: GateOptions) -> ProfileOutcome | None:
    """The emulator reports no timing (DESIGN.md); it names the kernel instantiations launched."""
    launched = sorted(getattr(runner, "launched", ()))
    return ProfileOutcome(profile={"launched": launched}) if launched else None


def classify_failure(returncode: int, stderr: str) -> tuple[str, str] | None:
    return classify(returncode, stderr)


@lru_cache(maxsize=1)
def _libasan() -> str:
    try:
        out = subprocess.run([emu_compile.CXX, "-print-file-name=libasan.so"], capture_output=True, text=True,
                             timeout=30).stdout.strip()
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
