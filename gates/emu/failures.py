"""Classify a gate child that died: KLEMU-ERROR lines, AddressSanitizer reports, fatal signals."""

from __future__ import annotations

import json
import re
import signal
import subprocess

_KLEMU = re.compile(r"^KLEMU-ERROR (\{.*\})\s*$", re.M)
_ASAN = re.compile(r"ERROR: AddressSanitizer: (?P<kind>[\w-]+)(?P<rest>.*)")
_ACCESS = re.compile(r"^(READ|WRITE) of size (\d+)", re.M)
_PC = re.compile(r" \[pc (?P<lib>/[^\]]+?)\+0x(?P<off>[0-9a-f]+)\]")
_FRAME = re.compile(r"^\s*#\d+ 0x[0-9a-f]+ in (?P<fn>.+?) (?P<file>[^\s]+\.(?:cu|cuh)):(?P<line>\d+)", re.M)

#: ASan report kinds that are memory-safety violations of the kernel (out_of_bounds)
_OOB_KINDS = {
    "heap-buffer-overflow",
    "stack-buffer-overflow",
    "global-buffer-overflow",
    "stack-buffer-underflow",
    "heap-use-after-free",
    "use-after-poison",
    "container-overflow",
    "dynamic-stack-buffer-overflow",
    "stack-use-after-scope",
    "stack-use-after-return",
    "unknown-crash",
    "wild-addr",
}


def _kernel_frame(stderr: str) -> str:
    m = _FRAME.search(stderr)
    if not m:
        return ""
    fn = m.group("fn").split("(")[0].strip()
    file = m.group("file").rsplit("/", 1)[-1]
    return f"{file}:{m.group('line')} (in {fn})"


def resolve_pc(library: str, offset: int) -> str:
    """`file:line` of a code offset in a built library, preferring the kernel's own .cu frame."""
    try:
        out = subprocess.run(
            ["addr2line", "-i", "-e", library, hex(offset)], capture_output=True, text=True, timeout=20
        ).stdout
    except (OSError, subprocess.SubprocessError):
        return ""
    frames = [ln.strip() for ln in out.splitlines() if ln.strip() and not ln.startswith("??")]
    mine = [f for f in frames if re.search(r"\.(cu|cuh):\d+", f)]
    pick = (mine or frames or [""])[0]
    return pick.rsplit("/", 1)[-1].split(" ")[0]


def _with_line(message: str) -> str:
    m = _PC.search(message)
    if not m:
        return message
    where = resolve_pc(m.group("lib"), int(m.group("off"), 16))
    return (
        message[: m.start()]
        + (f" at {where}" if where and not where.startswith("?") else "")
        + message[m.end() :]
    )


def classify(returncode: int, stderr: str) -> tuple[str, str] | None:
    """(category, message) for a failed child, or None when nothing is recognised."""
    found = _KLEMU.findall(stderr or "")
    if found:
        try:
            d = json.loads(found[-1])
            return str(d.get("category", "crash")), _with_line(str(d.get("message", "")))
        except json.JSONDecodeError:
            return "crash", found[-1]
    m = _ASAN.search(stderr or "")
    if m:
        kind = m.group("kind")
        where = _kernel_frame(stderr)
        access = _ACCESS.search(stderr)
        what = f"{access.group(1).lower()} of {access.group(2)} bytes" if access else "access"
        loc = f" at {where}" if where else ""
        if kind in _OOB_KINDS:
            words = "outside the tensor (guard zone)" if kind == "use-after-poison" else kind
            return "out_of_bounds", f"{what}{loc}: {words} (AddressSanitizer {kind})"
        if kind == "SEGV":
            return (
                "crash",
                f"invalid memory access{loc} (AddressSanitizer SEGV{m.group('rest').split(' (pc')[0]})",
            )
        if kind == "stack-overflow":
            return "crash", f"stack overflow of a CUDA thread{loc}"
        return "crash", f"AddressSanitizer {kind}{loc}"
    sig = -returncode if returncode < 0 else (returncode - 128 if returncode > 128 else 0)
    if sig in (signal.SIGSEGV, signal.SIGBUS):
        return "crash", f"invalid memory access ({signal.Signals(sig).name})"
    if sig == signal.SIGFPE:
        return "crash", "arithmetic exception (SIGFPE: integer division by zero?)"
    if sig == signal.SIGILL:
        return "crash", "illegal instruction (SIGILL)"
    if sig == signal.SIGABRT:  # say why when the program said it (the torch shim, an assert())
        why = [ln.strip() for ln in stderr.splitlines() if "klineage torch shim:" in ln or "Assertion" in ln]
        return "crash", "aborted (SIGABRT)" + (f": {why[-1]}" if why else "")
    return None
