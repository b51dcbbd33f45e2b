"""Run one candidate in a child process with a time limit.

A crash, a hang or an illegal access in untrusted kernel code must be a rejection with a
category, never a crash of the caller: the child gets its own process group (so a timeout kills
everything it started), and its verdict comes back as a JSON file, not through shared memory.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any


@dataclass
class ChildOutcome:
    returncode: int
    result: dict[str, Any] | None
    stdout: str
    stderr: str
    timed_out: bool
    elapsed_s: float

    @property
    def signal_name(self) -> str:
        if self.returncode < 0:
            try:
                return signal.Signals(-self.returncode).name
            except ValueError:
                return f"signal {-self.returncode}"
        return ""


def run_worker(payload: dict[str, Any], workdir: Path, timeout_s: float, env: dict[str, str] | None = None) -> ChildOutcome:
    """Run `python -m klineage.gates.worker payload.json result.json` and collect its verdict."""
    workdir.mkdir(parents=True, exist_ok=True)
    payload_path = workdir / "payload.json"
    result_path = workdir / "result.json"
    result_path.unlink(missing_ok=True)
    payload_path.write_text(json.dumps(payload))
    child_env = dict(os.environ)
    child_env.update(env or {})
    child_env.setdefault("PYTHONUNBUFFERED", "1")
    cmd = [sys.executable, "-m", "klineage.gates.worker", str(payload_path), str(result_path)]
    t0 = time.perf_counter()
    proc = subprocess.Popen(
        cmd,
        cwd=workdir,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        stdin=subprocess.DEVNULL,
        text=True,
        errors="replace",
        env=child_env,
        start_new_session=True,
    )
    timed_out = False
    try:
        out, err = proc.communicate(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        timed_out = True
        _kill_group(proc.pid)
        out, err = proc.communicate()
    elapsed = time.perf_counter() - t0
    (workdir / "child.stdout").write_text(out)
    (workdir / "child.stderr").write_text(err)
    result = None
    if not timed_out and result_path.exists():
        try:
            result = json.loads(result_path.read_text())
        except json.JSONDecodeError:
            result = None
    return ChildOutcome(proc.returncode if not timed_out else -9, result, out, err, timed_out, elapsed)


def _kill_group(pid: int) -> None:
    try:
        os.killpg(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
