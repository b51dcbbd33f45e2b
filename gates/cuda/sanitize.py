"""compute-sanitizer memcheck and racecheck over one launch of the candidate (`--sanitize`).

The probe (gates/cuda/probe.py) runs under each tool at the first test shape; memcheck findings
reject as `out_of_bounds`, racecheck hazards as `nondeterministic`, with the kernel's source line
(the library is built with -lineinfo). The report parser is pure and CPU-tested.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

TOOLS = {"memcheck": "out_of_bounds", "racecheck": "nondeterministic"}
ERROR_EXIT = 86
_PREFIX = re.compile(r"^=+\s?")
_LOCATION = re.compile(r"(?P<file>[\w./+-]+\.(?:cu|cuh|h|hpp|cpp)):(?P<line>\d+)")
_SUMMARY = re.compile(r"(?:ERROR|RACECHECK) SUMMARY: (?P<n>\d+) (?:errors?|hazards?)")
_HEADLINES = (
    "Invalid ",
    "Race reported",
    "Error: ",
    "Misaligned",
    "Out-of-range",
    "Barrier error",
    "Uninitialized",
    "Potential ",
)


@dataclass
class Finding:
    tool: str
    category: str
    headline: str
    location: str  # "kernel.cu:12" or ""
    count: int

    def message(self) -> str:
        where = f"{self.location}: " if self.location else ""
        plural = "s" if self.count != 1 else ""
        return f"{where}compute-sanitizer {self.tool}: {self.headline} ({self.count} report{plural})"


def sanitizer_command(tool: str, probe: Sequence[str], sanitizer: str = "compute-sanitizer") -> list[str]:
    cmd = [sanitizer, "--tool", tool, "--error-exitcode", str(ERROR_EXIT), "--print-limit", "20"]
    if tool == "racecheck":
        cmd += ["--racecheck-report", "all"]
    return cmd + list(probe)


def _clean(line: str) -> str:
    return _PREFIX.sub("", line).strip()


def parse_report(tool: str, output: str) -> Finding | None:
    """The first finding of a compute-sanitizer report, or None when it reports none."""
    lines = [_clean(ln) for ln in output.splitlines() if ln.startswith("=")]
    count = 0
    for ln in lines:
        m = _SUMMARY.search(ln)
        if m:
            count = max(count, int(m.group("n")))
    head_i = next(
        (i for i, ln in enumerate(lines) if ln.startswith(_HEADLINES) and "SUMMARY" not in ln), None
    )
    if head_i is None:
        return None if count == 0 else Finding(tool, TOOLS[tool], "errors reported", "", count)
    headline = lines[head_i]
    places: list[str] = []  # racecheck names both sides of a hazard: the write, then the read
    for ln in lines[head_i : head_i + 12]:
        if ln.startswith("Saved host backtrace"):
            break
        m = _LOCATION.search(ln)
        if m:
            place = f"{Path(m.group('file')).name}:{m.group('line')}"
            if place not in places:
                places.append(place)
    location = places[0] if places else ""
    if len(places) > 1:
        headline = f"{headline.rstrip(' :')} (with {', '.join(places[1:])})"
    headline = _LOCATION.sub(lambda m: f"{Path(m.group('file')).name}:{m.group('line')}", headline)
    return Finding(tool, TOOLS[tool], headline, location, max(count, 1))


@dataclass
class ToolRun:
    tool: str
    returncode: int
    output: str
    finding: Finding | None
    timed_out: bool = False


def run_tool(tool: str, probe: Sequence[str], timeout_s: float, env: dict[str, str] | None = None) -> ToolRun:
    sanitizer = shutil.which("compute-sanitizer")
    if not sanitizer:
        return ToolRun(tool, -1, "compute-sanitizer not found on PATH", None)
    try:
        proc = subprocess.run(
            sanitizer_command(tool, probe, sanitizer),
            capture_output=True,
            text=True,
            errors="replace",
            timeout=timeout_s,
            env=env,
            check=False,
        )
    except subprocess.TimeoutExpired as e:
        out = (e.stdout or b"").decode(errors="replace") if isinstance(e.stdout, bytes) else (e.stdout or "")
        return ToolRun(tool, -9, out, None, timed_out=True)
    output = proc.stdout + proc.stderr
    return ToolRun(tool, proc.returncode, output, parse_report(tool, output))


def run_all(
    probe: Sequence[str],
    timeout_s: float,
    tools: Sequence[str] = ("memcheck", "racecheck"),
    env: dict[str, str] | None = None,
) -> list[ToolRun]:
    """Each tool over its own probe process, concurrently (both are mostly host-bound)."""
    with ThreadPoolExecutor(max_workers=len(tools)) as pool:
        return list(pool.map(lambda t: run_tool(t, probe, timeout_s, env), tools))
