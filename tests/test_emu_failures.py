"""Classification of a dead emu gate child: KLEMU-ERROR lines, ASan reports, fatal signals."""

from __future__ import annotations

import signal

from klineage.gates.backend import GateOptions
from klineage.gates.emu import backend

ASAN_READ = """=================================================================
==1==ERROR: AddressSanitizer: heap-buffer-overflow on address 0x6130005541b4 at pc 0x7f1b bp 0x7fff sp 0x7fff
READ of size 4 at 0x6130005541b4 thread T0
    #0 0x7f1b5ed58849 in vadd4(float const*, float const*, float*, int) /tmp/work/build/kernel.cu:8
    #1 0x7f1b5ed58a25 in operator() /tmp/work/build/kernel.cu:15
    #2 0x7f1b5ed58a25 in operator() /work/main/gates/emu/runtime/include/klemu/host.h:135
"""


def test_klemu_error_line_wins() -> None:
    err = 'noise\nKLEMU-ERROR {"category": "crash", "message": "deadlock: 3 live threads"}\n'
    assert backend.classify_failure(86, err) == ("crash", "deadlock: 3 live threads")


def test_asan_overflow_is_out_of_bounds_with_kernel_line() -> None:
    cat, msg = backend.classify_failure(87, ASAN_READ)
    assert cat == "out_of_bounds"
    assert "kernel.cu:8" in msg and "vadd4" in msg and "read of 4 bytes" in msg


def test_asan_guard_zone_read_and_segv() -> None:
    cat, msg = backend.classify_failure(87, ASAN_READ.replace("heap-buffer-overflow", "use-after-poison"))
    assert cat == "out_of_bounds" and "outside the tensor" in msg
    segv = "==1==ERROR: AddressSanitizer: SEGV on unknown address 0x000000000010 (pc 0x1 bp 0x2 sp 0x3 T0)\n"
    cat, msg = backend.classify_failure(87, segv + ASAN_READ.split("\n", 3)[3])
    assert cat == "crash" and "invalid memory access" in msg and "kernel.cu:8" in msg


def test_signals() -> None:
    assert backend.classify_failure(-signal.SIGSEGV, "")[0] == "crash"
    assert "invalid memory access" in backend.classify_failure(-signal.SIGBUS, "")[1]
    assert backend.classify_failure(128 + signal.SIGSEGV, "")[0] == "crash"
    assert backend.classify_failure(1, "Traceback ...") is None


def test_child_env_preloads_asan_only_for_sanitize() -> None:
    assert backend.child_env(GateOptions(timeout_s=40)) == {"KLEMU_LAUNCH_CPU_S": "5"}
    env = backend.child_env(GateOptions(sanitize=True))
    assert "detect_leaks=0" in env["ASAN_OPTIONS"]
    assert env.get("LD_PRELOAD", "libasan").endswith(".so") or "libasan" in env.get("LD_PRELOAD", "libasan")


def test_backend_module_interface() -> None:
    assert backend.NAME == "emu" and backend.DEFAULT_SHAPE_SET == "emu"
    assert backend.toolchain().startswith("g++")
    assert backend.profile(None, None, GateOptions()) is None  # type: ignore[arg-type]
