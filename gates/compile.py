"""The compile stage: nvcc to a cubin with `-Xptxas -v`, parsed into diagnostics and resources.

Every backend runs this stage: it proves the candidate is real CUDA for the target architecture
(the emulator's host compiler would accept things nvcc rejects) and yields the per-kernel
resources (registers, shared memory, spills, stack, barriers) that skills record as effects.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import subprocess
import time
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

from klineage.gates.result import Resources

_DIAG = re.compile(
    r"^(?P<file>[^\s(][^(]*)\((?P<line>\d+)\): (?P<sev>error|warning|catastrophic error)[^:]*: (?P<msg>.*)$"
)
#: the host compiler's (and the preprocessor's) form, `file:line[:col]: [fatal ]error: message`,
#: e.g. a missing header; nvcc prints it as it is and then only "compilation terminated."
_HOST_DIAG = re.compile(
    r"^(?P<file>[^\s:][^:]*):(?P<line>\d+):(?:\d+:)? (?P<sev>fatal error|error|warning): (?P<msg>.*)$"
)
_ENTRY = re.compile(
    r"ptxas info\s*: (?:Compiling entry function|Function properties for) '?(?P<name>[\w$]+)'?"
)
_PROPS = re.compile(r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads")
_USED = re.compile(r"ptxas info\s*: Used (\d+) registers")
_BARRIERS = re.compile(r"used (\d+) barriers")
_SMEM = re.compile(r"(\d+) bytes smem")
_CMEM = re.compile(r"(\d+) bytes cmem\[0\]")
_PTXAS_ERR = re.compile(r"^ptxas (?:fatal|error)\s*: (?P<msg>.*)$")


@dataclass(frozen=True)
class Diagnostic:
    file: str
    line: int
    severity: str
    message: str

    def __str__(self) -> str:
        return f"{self.file}:{self.line}: {self.severity}: {self.message}"


@dataclass
class CompileResult:
    ok: bool
    diagnostics: list[Diagnostic] = field(default_factory=list)
    resources: dict[str, Resources] = field(default_factory=dict)
    log: str = ""
    timed_out: bool = False
    elapsed_s: float = 0.0

    @property
    def errors(self) -> list[Diagnostic]:
        return [d for d in self.diagnostics if d.severity != "warning"]

    def first_error(self) -> str:
        return "nvcc timed out" if self.timed_out else first_error(self.log)


def first_error(log: str) -> str:
    """The first compiler error as `file:line: error: message`, else the last non-empty line."""
    errs = [d for d in parse_diagnostics(log) if d.severity != "warning"]
    if errs:
        return str(errs[0])
    tail = [ln.strip() for ln in log.splitlines() if ln.strip()]
    return tail[-1] if tail else "nvcc failed"


def arch_flags(arch: str) -> list[str]:
    """`sm_90a` -> `-gencode=arch=compute_90a,code=sm_90a`; the `-arch=sm_90a` shorthand also
    runs a plain sm_90 pass that rejects sm_90a-only instructions (HOPPER.md). Anything that is
    not `sm_NN[a|f]` (e.g. `native`, `all`) is passed as `-arch=`."""
    m = re.fullmatch(r"sm_(\d+[a-z]?)", arch.strip())
    if m is None:
        return [f"-arch={arch.strip()}"]
    num = m.group(1)
    return [f"-gencode=arch=compute_{num},code=sm_{num}"]


@lru_cache(maxsize=1)
def nvcc_version() -> str:
    """nvcc's version, remembered on disk per nvcc binary (path, size, mtime): a cached gate
    answer then starts no compiler process."""
    nvcc = shutil.which("nvcc")
    if not nvcc:
        return ""
    try:
        st = os.stat(nvcc)
        memo_key = f"{os.path.realpath(nvcc)}|{st.st_size}|{st.st_mtime_ns}"
    except OSError:
        memo_key = ""
    memo = _version_memo()
    if memo_key and memo is not None:
        try:
            known = json.loads(memo.read_text())
            if known.get("key") == memo_key and known.get("version"):
                return str(known["version"])
        except (OSError, ValueError):
            pass
    out = subprocess.run([nvcc, "--version"], capture_output=True, text=True).stdout
    m = re.search(r"release ([\d.]+), V([\d.]+)", out)
    version = m.group(2) if m else out.strip().splitlines()[-1]
    if memo_key and memo is not None:
        with contextlib.suppress(OSError):
            tmp = memo.with_name(f".{memo.name}.{os.getpid()}")
            tmp.write_text(json.dumps({"key": memo_key, "version": version}))
            os.replace(tmp, memo)
    return version


def _version_memo() -> Path | None:
    try:
        from klineage.paths import home

        return home() / "nvcc_version.json"
    except OSError:
        return None


def parse_diagnostics(log: str) -> list[Diagnostic]:
    out: list[Diagnostic] = []
    for line in log.splitlines():
        m = _DIAG.match(line.strip()) or _HOST_DIAG.match(line.strip())
        if m:
            sev = "error" if "error" in m.group("sev") else "warning"
            out.append(Diagnostic(m.group("file"), int(m.group("line")), sev, m.group("msg").strip()))
            continue
        m = _PTXAS_ERR.match(line.strip())
        if m:
            out.append(Diagnostic("ptxas", 0, "error", m.group("msg").strip()))
    return out


def parse_ptxas(log: str, demangle: bool = True) -> dict[str, Resources]:
    """Resources per kernel from `-Xptxas -v` output (names demangled when c++filt exists)."""
    res: dict[str, Resources] = {}
    current: str | None = None
    for line in log.splitlines():
        m = _ENTRY.search(line)
        if m:
            current = m.group("name")
            res.setdefault(current, Resources())
            continue
        if current is None:
            continue
        r = res[current]
        m = _PROPS.search(line)
        if m:
            r.stack_bytes, r.spill_stores, r.spill_loads = (int(g) for g in m.groups())
            continue
        m = _USED.search(line)
        if m:
            r.registers = int(m.group(1))
            if (b := _BARRIERS.search(line)) is not None:
                r.barriers = int(b.group(1))
            if (s := _SMEM.search(line)) is not None:
                r.shared_bytes = int(s.group(1))
            if (c := _CMEM.search(line)) is not None:
                r.constant_bytes = int(c.group(1))
    return _demangle(res) if demangle else res


def _demangle(res: dict[str, Resources]) -> dict[str, Resources]:
    tool = shutil.which("c++filt")
    if not tool or not res:
        return res
    names = list(res)
    out = subprocess.run([tool], input="\n".join(names), capture_output=True, text=True).stdout.splitlines()
    if len(out) != len(names):
        return res
    return {pretty: res[raw] for raw, pretty in zip(names, out, strict=True)}


def compile_cubin(
    source: str,
    workdir: Path,
    arch: str = "sm_90a",
    flags: tuple[str, ...] = ("-O3", "-std=c++17"),
    timeout_s: float = 120.0,
    filename: str = "kernel.cu",
) -> CompileResult:
    """Compile `source` to a cubin with nvcc in a child process with a time limit."""
    nvcc = shutil.which("nvcc")
    if not nvcc:
        return CompileResult(ok=False, log="nvcc not found on PATH")
    workdir.mkdir(parents=True, exist_ok=True)
    src = workdir / filename
    src.write_text(source)
    cmd = [
        nvcc,
        "-cubin",
        *flags,
        *arch_flags(arch),
        "-Xptxas",
        "-v",
        "-o",
        str(workdir / "kernel.cubin"),
        filename,
    ]
    t0 = time.perf_counter()
    try:
        proc = subprocess.run(cmd, cwd=workdir, capture_output=True, text=True, timeout=timeout_s)
    except subprocess.TimeoutExpired:
        return CompileResult(ok=False, timed_out=True, log="timeout", elapsed_s=time.perf_counter() - t0)
    log = proc.stdout + proc.stderr
    (workdir / "nvcc.log").write_text(" ".join(cmd) + "\n" + log)
    return CompileResult(
        ok=proc.returncode == 0,
        diagnostics=parse_diagnostics(log),
        resources=parse_ptxas(log) if proc.returncode == 0 else {},
        log=log,
        elapsed_s=time.perf_counter() - t0,
    )
