"""Run one candidate in a child process with a time limit.

A crash, a hang or an illegal access in untrusted kernel code must be a rejection with a
category, never a crash of the caller: the child gets its own process group (so a timeout kills
everything it started), and its verdict comes back as a JSON file, not through shared memory.
The child is forked from a pre-imported zygote (gates/zygote.py: saves the ~2 s torch import per
run) or, with KLINEAGE_GATE_FORK=0 or an LD_PRELOAD in the backend's env, exec'd fresh. For the
`cuda` backend the run goes to the device's resident worker instead (gates/resident.py: the same
worker code in a long-lived process holding the CUDA context), unless KLINEAGE_GATE_WORKER=child.
"""

from __future__ import annotations

import json
import locale
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from klineage.gates import resident, zygote


@dataclass
class ChildOutcome:
    returncode: int
    result: dict[str, Any] | None
    stdout: str
    stderr: str
    timed_out: bool
    elapsed_s: float
    via: str = "exec"  # where it ran: "zygote" (forked), "exec" (fresh interpreter) or "resident" (the device's worker)

    @property
    def signal_name(self) -> str:
        if self.returncode < 0:
            try:
                return signal.Signals(-self.returncode).name
            except ValueError:
                return f"signal {-self.returncode}"
        return ""


def fork_enabled(env: dict[str, str] | None) -> bool:
    """Whether a run forks from the pre-imported zygote (gates/zygote.py) rather than exec'ing a
    fresh interpreter: not when KLINEAGE_GATE_FORK=0, nor when the backend preloads a library
    (ASan's LD_PRELOAD must be in place when the process is exec'd)."""
    if os.environ.get("KLINEAGE_GATE_FORK", "1").strip().lower() in ("0", "false", "no", "off"):
        return False
    return "LD_PRELOAD" not in (env or {})


def run_worker(
    payload: dict[str, Any], workdir: Path, timeout_s: float, env: dict[str, str] | None = None
) -> ChildOutcome:
    """Run the worker on `payload` in a child process (`klineage.gates.worker PAYLOAD RESULT`,
    forked from the zygote or exec'd fresh, see `fork_enabled`) or on the resident worker of the
    payload's backend (`resident.enabled`), and collect its verdict."""
    workdir.mkdir(parents=True, exist_ok=True)
    payload_path = workdir / "payload.json"
    result_path = workdir / "result.json"
    result_path.unlink(missing_ok=True)
    payload_path.write_text(json.dumps(payload))
    child_env = zygote.with_child_defaults(dict(os.environ))
    child_env.update(env or {})
    child_env.setdefault("PYTHONUNBUFFERED", "1")
    t0 = time.perf_counter()
    via = "exec"
    backend = str(payload.get("options", {}).get("backend", ""))
    if resident.enabled(backend, env):
        try:
            returncode, timed_out = resident.run(
                backend, workdir, payload_path, result_path, child_env, timeout_s
            )
            out, err = _read_capture(workdir / "child.stdout"), _read_capture(workdir / "child.stderr")
            via = "resident"
        except resident.WorkerUnavailable:
            result_path.unlink(missing_ok=True)
            t0 = time.perf_counter()
    if via == "exec" and fork_enabled(env):
        try:
            returncode, timed_out = zygote.run_forked(
                workdir, payload_path, result_path, child_env, timeout_s
            )
            out, err = _read_capture(workdir / "child.stdout"), _read_capture(workdir / "child.stderr")
            via = "zygote"
        except zygote.ZygoteUnavailable:
            result_path.unlink(missing_ok=True)
            t0 = time.perf_counter()
    if via == "exec":
        returncode, timed_out, out, err = _run_fresh(payload_path, result_path, workdir, child_env, timeout_s)
    elapsed = time.perf_counter() - t0
    (workdir / "child.stdout").write_text(out)
    (workdir / "child.stderr").write_text(err)
    result = None
    if not timed_out and result_path.exists():
        try:
            result = json.loads(result_path.read_text())
        except json.JSONDecodeError:
            result = None
    return ChildOutcome(returncode if not timed_out else -9, result, out, err, timed_out, elapsed, via)


def _run_fresh(
    payload_path: Path, result_path: Path, workdir: Path, child_env: dict[str, str], timeout_s: float
) -> tuple[int, bool, str, str]:
    """`python -m klineage.gates.worker` in a new session: (return code, timed out, stdout, stderr)."""
    cmd = [sys.executable, "-m", "klineage.gates.worker", str(payload_path), str(result_path)]
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
        zygote.kill_group(proc.pid)
        out, err = proc.communicate()
    return proc.returncode, timed_out, out, err


def _read_capture(path: Path) -> str:
    """A capture file decoded as Popen's text mode decodes a pipe (locale encoding, errors
    replaced, universal newlines), so both paths leave the same text."""
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return ""
    text = data.decode(locale.getpreferredencoding(False), errors="replace")
    return text.replace("\r\n", "\n").replace("\r", "\n")
