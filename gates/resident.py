"""A resident gate worker per device: one long-lived process that holds torch and the CUDA
context and runs candidate after candidate, instead of a new child per candidate.

Why: a child per candidate pays the interpreter, the torch import, the CUDA context, cuBLAS and
CUPTI start-up every time (seconds on the H200); a resident worker pays them once. It runs the
very code the child runs (`klineage.gates.worker.main`: the shared correctness protocol, then the
backend's profile stage) and writes the same RESULT.json, so verdicts do not depend on the path.

Isolation is by process, as for the child:
- the worker runs in a session of its own, stdin from /dev/null, each candidate's stdout and
  stderr into that run folder's capture files, its environment fixed when it starts (a caller
  whose environment changed gets a new worker);
- a candidate that kills the worker (a segfault, an abort) gets the verdict a dead child gets,
  from the exit status and the captured stderr, and a new worker serves the next one;
- the parent is the watchdog: past the candidate's time limit it kills the worker's process
  group (`timeout`) and starts another;
- after every candidate the worker compares the process and the device with its state after
  warm-up (gates/health.py: host threads left running, a broken CUDA context, device memory
  left allocated, a changed device limit or cache setting); any difference retires it, after its
  verdict is written, so a candidate can never change a later candidate's verdict or timing.
  A worker also retires after `MAX_RUNS` candidates (each loads a library it cannot unload).

Wire protocol (a stream socket pair, one JSON line per message): the worker sends
`{"ready": pid}` after warm-up; per request `{"workdir", "payload", "result"}` it answers
`{"started": true}`, runs the candidate, then `{"status": code, "retire": reason | null}`.

Used for the `cuda` backend by default (KLINEAGE_GATE_WORKER=child turns it off,
KLINEAGE_GATE_WORKER=resident turns it on for every backend); never for an env with an
LD_PRELOAD (it must be in place when a process is exec'd).
"""

from __future__ import annotations

import atexit
import contextlib
import ctypes
import io
import json
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from klineage.gates import zygote

#: how long a new worker may take to import torch and warm up before the caller gives up on it
START_WAIT_S = 180.0
#: candidates one worker serves before it is replaced
MAX_RUNS = 200
#: host memory for generated input sets kept between candidates (gates/protocol.py, `host_inputs`)
INPUT_MEMO_BYTES = 4 << 30
#: device memory for generated input sets kept on the device (gates/protocol.py, `device_inputs`):
#: at most this, and at most a third of the device (`device_memo_bytes`)
DEVICE_MEMO_BYTES = 48 << 30


def device_memo_bytes(total_device_bytes: int) -> int:
    """The kept input sets' share of a device: a materializer's loop interleaves every workload of
    the corpus (about 1 GB of bench-shape sets each: three refill sets and the check's), and a
    set regenerated on the host holds the GPU lock for seconds; a third leaves the candidates and
    a second worker room."""
    return min(DEVICE_MEMO_BYTES, total_device_bytes // 3)


#: where a worker's own output goes (never a candidate's): under the KLineage home
LOG_NAME = "resident-worker.log"


def mode() -> str:
    """KLINEAGE_GATE_WORKER: 'resident', 'child' or 'auto' (resident for cuda only)."""
    value = os.environ.get("KLINEAGE_GATE_WORKER", "auto").strip().lower()
    return value if value in ("resident", "child") else "auto"


def enabled(backend: str, env: dict[str, str] | None) -> bool:
    """Whether a run of `backend` with the backend's `env` goes to a resident worker."""
    if "LD_PRELOAD" in (env or {}):
        return False
    m = mode()
    return m == "resident" or (m == "auto" and backend == "cuda")


class WorkerUnavailable(Exception):
    """No worker could take this run (it would not start, or died before taking it)."""


@dataclass
class Stats:
    """What the workers of this process did, for benchmarks and tests."""

    started: int = 0
    runs: int = 0
    start_s: list[float] = field(default_factory=list)
    retired: list[str] = field(default_factory=list)  # one reason per replaced worker


STATS = Stats()


# ---- caller side ----------------------------------------------------------------------------------


class Worker:
    """One resident worker process and the caller's end of its socket."""

    def __init__(self, backend: str, env: dict[str, str], command: list[str] | None = None) -> None:
        self.backend, self.env = backend, env
        self.owner_pid = os.getpid()
        self.lock = threading.Lock()
        self.runs = 0
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        cmd = command or [sys.executable, "-m", "klineage.gates.resident"]
        log = _log_file()
        t0 = time.perf_counter()
        try:
            self.proc = subprocess.Popen(
                [*cmd, str(theirs.fileno()), backend],
                pass_fds=(theirs.fileno(),),
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=log,
                env=env,
                cwd="/",
                start_new_session=True,
            )
        finally:
            theirs.close()
            if log is not subprocess.DEVNULL:
                log.close()
        self.sock = ours
        self.lines = zygote._Lines(ours)
        try:
            ready = self.lines.next(time.monotonic() + START_WAIT_S)
        except TimeoutError:
            ready = None
        if not ready or "ready" not in ready:
            self.kill()
            raise WorkerUnavailable(f"the resident {backend} worker did not start (see {LOG_NAME})")
        STATS.started += 1
        STATS.start_s.append(round(time.perf_counter() - t0, 3))

    def usable(self, env: dict[str, str]) -> bool:
        return self.owner_pid == os.getpid() and self.proc.poll() is None and self.env == env

    def kill(self) -> None:
        """The whole process group: the worker and anything it started."""
        with contextlib.suppress(OSError):
            self.sock.close()
        if self.owner_pid == os.getpid():
            zygote.kill_group(self.proc.pid)
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.proc.wait(timeout=10)

    def close(self) -> None:
        """Ask it to exit (socket closed); kill it if it does not."""
        with contextlib.suppress(OSError):
            self.sock.close()
        if self.owner_pid == os.getpid():
            try:
                self.proc.wait(timeout=0.5)
            except subprocess.TimeoutExpired:  # still tearing torch down: nothing of it is needed
                self.kill()

    def run(
        self, workdir: Path, payload_path: Path, result_path: Path, timeout_s: float
    ) -> tuple[int, bool, str | None]:
        """(status, timed out, retire reason) of one candidate. Raises WorkerUnavailable when the
        worker died before taking the run (nothing of the candidate ran)."""
        request = {"workdir": str(workdir), "payload": str(payload_path), "result": str(result_path)}
        try:
            self.sock.sendall(json.dumps(request).encode() + b"\n")
            started = self.lines.next(time.monotonic() + 30.0)
        except (OSError, TimeoutError):
            started = None
        if not started or not started.get("started"):
            self.kill()
            raise WorkerUnavailable("the resident worker died before the run")
        self.runs += 1
        STATS.runs += 1
        try:
            done = self.lines.next(time.monotonic() + timeout_s)
        except TimeoutError:
            self.kill()
            return -signal.SIGKILL, True, "timeout: killed by the watchdog"
        if done is None:  # the candidate took the worker down with it: its exit status is the verdict's
            with contextlib.suppress(OSError):
                self.sock.close()
            status = self.proc.wait()
            zygote.kill_group(self.proc.pid)
            return status, False, f"died ({_status_words(status)})"
        return int(done["status"]), False, done.get("retire")


def _status_words(status: int) -> str:
    if status < 0:
        with contextlib.suppress(ValueError):
            return signal.Signals(-status).name
        return f"signal {-status}"
    return f"exit code {status}"


def _log_file() -> Any:
    try:
        from klineage.paths import home

        path = home() / LOG_NAME
        path.parent.mkdir(parents=True, exist_ok=True)
        return open(path, "ab")  # noqa: SIM115 - handed to the child, closed right after
    except OSError:
        return subprocess.DEVNULL


_lock = threading.Lock()
_workers: dict[tuple[str, str], Worker] = {}


def _key(backend: str, env: dict[str, str]) -> tuple[str, str]:
    """One worker per backend and device (named as the device lock names it)."""
    return backend, env.get("CUDA_VISIBLE_DEVICES", "").strip() or "all"


def _checkout(backend: str, env: dict[str, str]) -> Worker:
    key = _key(backend, env)
    with _lock:
        w = _workers.get(key)
        if w is not None and not w.usable(env):
            with w.lock:  # a run in flight on it ends first
                w.close()
            _workers.pop(key, None)
            w = None
        if w is None:
            w = Worker(backend, env)
            _workers[key] = w
        return w


def _retire(w: Worker, reason: str) -> None:
    STATS.retired.append(reason)
    log = _log_file()
    if log is not subprocess.DEVNULL:  # why a worker went, beside its own output: evidence for the next run
        with log:
            log.write(f"{time.strftime('%H:%M:%S')} retired after {w.runs} runs: {reason}\n".encode())
    with _lock:
        for k, v in list(_workers.items()):
            if v is w:
                del _workers[k]
    w.kill()


def run(
    backend: str, workdir: Path, payload_path: Path, result_path: Path, env: dict[str, str], timeout_s: float
) -> tuple[int, bool]:
    """Run one candidate on this device's resident worker: (status, timed out), as the child
    path reports them. Raises WorkerUnavailable when no worker can take it."""
    for _attempt in range(2):
        w = _checkout(backend, env)
        with w.lock:
            if w.proc.poll() is not None:  # died between runs (another thread's candidate)
                continue
            try:
                status, timed_out, retire = w.run(workdir, payload_path, result_path, timeout_s)
            except WorkerUnavailable:
                _retire(w, "died between candidates")
                continue
            if retire:
                _retire(w, retire)
            return status, timed_out
    raise WorkerUnavailable("no resident worker could take the run")


@atexit.register
def shutdown() -> None:
    """Close every worker of this process (they exit when their socket closes)."""
    with _lock:
        workers = list(_workers.values())
        _workers.clear()
    for w in workers:
        w.close()


# ---- worker side ----------------------------------------------------------------------------------


def _flush() -> None:
    with contextlib.suppress(Exception):
        sys.stdout.flush()
        sys.stderr.flush()
    with contextlib.suppress(Exception):
        ctypes.CDLL(None).fflush(None)  # the kernel's printf output, as a normal exit would


def serve(sock: socket.socket, backend_name: str) -> int:
    import torch

    from klineage.gates import health, protocol, worker
    from klineage.gates.backends import get_backend

    seed = torch.initial_seed()  # every candidate starts from the generator state a fresh child has
    protocol.INPUT_MEMO_BYTES = INPUT_MEMO_BYTES
    if backend_name == "cuda":  # on the host the kept copies of host_inputs are enough
        protocol.DEVICE_MEMO_BYTES = device_memo_bytes(torch.cuda.get_device_properties(0).total_memory)
    backend = get_backend(backend_name)
    health.warm_up(backend)
    baseline = health.snapshot(backend)
    saved = (os.dup(1), os.dup(2))
    # unbuffered, as PYTHONUNBUFFERED makes them, so output before a crash is not lost
    sys.stdout = io.TextIOWrapper(
        io.FileIO(1, "w", closefd=False), encoding="utf-8", errors="replace", write_through=True
    )
    sys.stderr = io.TextIOWrapper(
        io.FileIO(2, "w", closefd=False), encoding="utf-8", errors="backslashreplace", write_through=True
    )
    lines = zygote._Lines(sock)
    sock.sendall(json.dumps({"ready": os.getpid()}).encode() + b"\n")
    served = 0
    seen: set[tuple[str, str]] = set()
    held = 0
    idle_free: int | None = None  # free device memory when the worker last went idle
    path0 = sys.path[0]
    while True:
        try:
            req = lines.next(time.monotonic() + 10**9)
        except TimeoutError:
            continue
        if req is None:
            return 0
        sock.sendall(b'{"started": true}\n')
        t0 = time.perf_counter()
        arrived_free = health.free_bytes(backend)
        others = 0 if idle_free is None or arrived_free is None else arrived_free - idle_free
        baseline = health.rebase(baseline, idle_free, arrived_free)
        baseline = _first_look(backend, req["payload"], baseline, seen)
        t1 = time.perf_counter()
        os.chdir(req["workdir"])
        zygote.redirect_stdio(req["workdir"])
        sys.path[0] = req["workdir"]
        torch.manual_seed(seed)  # the CPU and every CUDA generator, as at a fresh start
        try:
            code = worker.main([str(worker.__file__), req["payload"], req["result"]])
        except SystemExit as e:  # what the candidate's exit does to a child: the worker dies the same way
            code = zygote._exit_code(e)
            _flush()
            os._exit(code)
        except BaseException:  # noqa: BLE001 - as an uncaught exception ends a fresh interpreter
            import traceback

            traceback.print_exc()
            _flush()
            os._exit(1)
        _flush()
        os.dup2(saved[0], 1)
        os.dup2(saved[1], 2)
        sys.path[0] = path0
        os.chdir("/")
        served += 1
        t2 = time.perf_counter()
        now = health.snapshot(backend)
        held = _note_held(baseline, now, held, req["workdir"])
        reason = health.drift(baseline, now) or protocol.memo_intact()
        idle_free = now.get("free_bytes")  # the snapshot just taken: the device, as this worker leaves it
        print(times_line(req["workdir"], t1 - t0, t2 - t1, time.perf_counter() - t2, others))
        if reason is None and served >= MAX_RUNS:
            reason = f"served {served} candidates"
        sock.sendall(json.dumps({"status": code, "retire": reason}).encode() + b"\n")
        if reason is not None:
            return 0


def times_line(workdir: str, first_look_s: float, candidate_s: float, health_s: float, others: int) -> str:
    """The worker log's line per candidate: where the worker's time went around it (its first
    look at a new workload, the candidate, the health check) and how much free device memory
    other processes took (negative: gave back) while it was idle (`health.rebase`);
    benchmarks/gate_stages.py reads it."""
    return (
        f"resident: {workdir} first_look_s={first_look_s:.3f} candidate_s={candidate_s:.3f} "
        f"health_s={health_s:.3f} others_mib={round(others / 2**20)}"
    )


#: `times_line`'s line, read back (its named groups are its fields)
TIMES_LINE = re.compile(
    r"resident: \S+ first_look_s=(?P<first_look_s>[\d.]+) candidate_s=(?P<candidate_s>[\d.]+) "
    r"health_s=(?P<health_s>[\d.]+) others_mib=(?P<others_mib>-?\d+)"
)


#: growth of held device memory (bytes) in one candidate that the worker log names
NOTE_HELD_BYTES = 16 << 20


def _note_held(baseline: dict[str, Any], now: dict[str, Any], held: int, workdir: str) -> int:
    """Device memory held beyond the baseline after this candidate (not torch's allocator's); a
    candidate that grew it by NOTE_HELD_BYTES or more is named in the worker log with its run
    folder, so a retirement for memory can be traced to the candidates that took it."""
    from klineage.gates import health

    if "free_bytes" not in now or "free_bytes" not in baseline:
        return held
    total = health.held_bytes(baseline, now)
    if total - held >= NOTE_HELD_BYTES:
        print(
            f"resident: {(total - held) >> 20} MiB more device memory held ({total >> 20} MiB in all) after {workdir}"
        )
    return total


def _first_look(
    backend: Any, payload_path: str, baseline: dict[str, Any], seen: set[tuple[str, str]]
) -> dict[str, Any]:
    """Before a workload's first candidate in this worker: the backend's `warm_up_workload` (the
    torch reference and vendor, whose first calls load kernel modules), with the baseline moved by
    exactly what that took (gates/health.py `forgive`). Without it a worker retired at the first
    candidate of nearly every new workload (nine restarts of 6.5 s, and their input sets lost, in
    one leave-one-out call). A warm-up that fails changes nothing: the candidate meets the same."""
    hook = getattr(backend, "warm_up_workload", None)
    if hook is None:
        return baseline
    from klineage.gates import health, worker
    from klineage.workload import load_workload

    try:
        payload = json.loads(Path(payload_path).read_text())
        options = worker.options_from(payload["options"])
        key = (str(payload["workload_dir"]), json.dumps(options.extra.get("bench_shape"), sort_keys=True))
        if key in seen or not options.time_kernel:
            return baseline
        seen.add(key)
        before = health.snapshot(backend)
        hook(load_workload(payload["workload_dir"]), options)
        return health.forgive(baseline, before, health.snapshot(backend))
    except Exception as e:  # noqa: BLE001 - the candidate's own run reports what is wrong
        print(f"resident: warm-up of a workload failed: {type(e).__name__}: {e}", file=sys.stderr)
        return baseline


def main(argv: list[str]) -> int:
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # a Ctrl-C is the caller's to handle
    sock = socket.socket(fileno=int(argv[1]))
    return serve(sock, argv[2])


if __name__ == "__main__":
    sys.exit(main(sys.argv))
