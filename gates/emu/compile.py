"""g++ for the emu backend: cached runtime objects + precompiled header, kernel build, diagnostics.

The runtime (klemu_rt.cpp, switch.S) and a precompiled klemu.h are built once per content hash
of the runtime sources, compiler and flags, under `$KLINEAGE_HOME/cache/emu/` (default
`~/.cache/klineage/emu/`). A kernel build is then a single g++ call on the translated file.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import subprocess
import tempfile
import time
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

RUNTIME = Path(__file__).resolve().parent / "runtime"
INCLUDE = RUNTIME / "include"
CXX = os.environ.get("KLEMU_CXX", "g++")

COMMON_FLAGS = (
    "-std=c++17",
    "-fPIC",
    "-fno-strict-aliasing",
    "-fno-threadsafe-statics",
    "-ftrivial-auto-var-init=pattern",
    "-fno-math-errno",
    "-Wno-unknown-pragmas",
    "-fdiagnostics-color=never",
    "-fmax-errors=8",
    "-g1",  # line tables: run-time crashes are reported with the kernel's file:line
    "-gdwarf-4",  # binutils addr2line maps #line file names correctly only for DWARF 4
)
ASAN_FLAGS = ("-fsanitize=address", "-fno-omit-frame-pointer")


def flags(sanitize: bool, opt: str = "-O1") -> list[str]:
    out = [opt, *COMMON_FLAGS]
    if sanitize:
        out += ASAN_FLAGS
    return out


@lru_cache(maxsize=1)
def compiler_version() -> str:
    try:
        out = subprocess.run(
            [CXX, "-dumpfullversion"], capture_output=True, text=True, timeout=30
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return f"{CXX} (missing)"
    return f"{Path(CXX).name} {out}"


@lru_cache(maxsize=1)
def runtime_hash() -> str:
    h = hashlib.sha256()
    for p in sorted(RUNTIME.rglob("*")):
        if p.is_file() and p.suffix in (".h", ".hpp", ".cpp", ".S"):
            h.update(str(p.relative_to(RUNTIME)).encode())
            h.update(p.read_bytes())
    return h.hexdigest()[:16]


#: the translation to C++ (what the rewrite inserts decides verdicts as much as the runtime does)
TRANSLATOR = ("rewrite.py", "analysis.py", "ptx.py", "unsupported.py")


@lru_cache(maxsize=1)
def translator_hash() -> str:
    h = hashlib.sha256()
    for name in TRANSLATOR:
        h.update(name.encode())
        h.update((RUNTIME.parent / name).read_bytes())
    return h.hexdigest()[:16]


def cache_root() -> Path:
    home = os.environ.get("KLINEAGE_HOME")
    base = Path(home) / "cache" if home else Path.home() / ".cache" / "klineage"
    return base / "emu"


@dataclass(frozen=True)
class RuntimeBuild:
    """Paths of one cached runtime build (objects + precompiled header)."""

    dir: Path
    objects: tuple[Path, ...]
    header: Path  # force-included; klemu.h.gch lies next to it


def _run(cmd: list[str], cwd: Path | None = None, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    return subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, timeout=timeout)


def runtime(sanitize: bool, opt: str = "-O1") -> RuntimeBuild:
    """Build (once) or find the cached runtime for these flags."""
    fl = flags(sanitize, opt)
    key = hashlib.sha256(
        "\0".join([runtime_hash(), compiler_version(), str(INCLUDE), *fl]).encode()
    ).hexdigest()[:16]
    final = cache_root() / key
    rb = RuntimeBuild(
        final,
        (final / "klemu_rt.o", final / "klemu_tc.o", final / "klemu_hopper.o", final / "switch.o"),
        final / "klemu.h",
    )
    if all(p.exists() for p in (*rb.objects, final / "klemu.h.gch")):
        return rb
    final.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{key}-", dir=final.parent))
    try:
        (tmp / "klemu.h").write_text(f'#include "{INCLUDE / "klemu.h"}"\n')
        inc = ["-I", str(INCLUDE)]
        steps = [
            [CXX, *fl, *inc, "-c", str(RUNTIME / "src" / "klemu_rt.cpp"), "-o", str(tmp / "klemu_rt.o")],
            [CXX, *fl, *inc, "-c", str(RUNTIME / "src" / "klemu_tc.cpp"), "-o", str(tmp / "klemu_tc.o")],
            [
                CXX,
                *fl,
                *inc,
                "-c",
                str(RUNTIME / "src" / "klemu_hopper.cpp"),
                "-o",
                str(tmp / "klemu_hopper.o"),
            ],
            [CXX, "-c", str(RUNTIME / "src" / "switch.S"), "-o", str(tmp / "switch.o")],
            [CXX, *fl, *inc, "-x", "c++-header", str(tmp / "klemu.h"), "-o", str(tmp / "klemu.h.gch")],
        ]
        for cmd in steps:
            r = _run(cmd)
            if r.returncode != 0:
                raise RuntimeError(f"building the emu runtime failed: {' '.join(cmd)}\n{r.stderr}")
        try:
            os.replace(tmp, final)
        except OSError:  # another process won the race; use its build
            shutil.rmtree(tmp, ignore_errors=True)
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)
    return rb


@dataclass
class CompileResult:
    ok: bool
    log: str
    message: str
    elapsed_s: float


_DIAG = re.compile(
    r"^(?P<file>[^:\n]+):(?P<line>\d+):(?:\d+:)? (?P<kind>fatal error|error): (?P<msg>.*)$", re.M
)


def summarize_errors(log: str, source_name: str) -> str:
    """`file:line: message` for the first errors, preferring those in the kernel file."""
    diags = [m for m in _DIAG.finditer(log)]
    mine = [m for m in diags if Path(m.group("file")).name == Path(source_name).name] or diags
    lines = [f"{Path(m.group('file')).name}:{m.group('line')}: {m.group('msg')}" for m in mine[:3]]
    if not lines:
        tail = [ln for ln in log.strip().splitlines() if ln.strip()][-3:]
        return "; ".join(tail) or "g++ failed"
    return "; ".join(lines)


def compile_kernel(
    cpp: Path, out: Path, source_name: str, sanitize: bool, timeout: float = 120.0, opt: str = "-O1"
) -> CompileResult:
    """Compile the translated file and link it with the runtime into a shared library."""
    t0 = time.monotonic()
    rb = runtime(sanitize, opt)
    cmd = [
        CXX,
        *flags(sanitize, opt),
        "-I",
        str(INCLUDE),
        "-include",
        str(rb.header),
        "-shared",
        str(cpp),
        *map(str, rb.objects),
        "-o",
        str(out),
    ]
    try:
        r = _run(cmd, cwd=cpp.parent, timeout=timeout)
    except subprocess.TimeoutExpired:
        return CompileResult(False, "", f"g++ took longer than {timeout:.0f} s", time.monotonic() - t0)
    log = r.stderr
    if r.returncode != 0:
        return CompileResult(False, log, summarize_errors(log, source_name), time.monotonic() - t0)
    return CompileResult(True, log, "", time.monotonic() - t0)
