"""A pre-imported zygote for gate children: fork a worker instead of starting Python and torch.

Why: a fresh `python -m klineage.gates.worker` spends about 2 s importing torch before it runs
anything, and mining makes hundreds of gate runs. The zygote is a separate interpreter (started
by exec, never a fork of the caller, so it holds none of the caller's state) that imports the
worker's modules once and then forks one child per gate run. The child keeps the isolation of
the fresh-interpreter path (gates/child.py): its own session (a timeout kills its whole process
group), stdin from /dev/null, stdout/stderr into the run folder's capture files, the caller's
environment applied before anything of the candidate loads, and its verdict in RESULT.json.

Protocol: the caller holds one SOCK_SEQPACKET control socket to the zygote and passes, per run, one
end of a fresh socket pair over it (SCM_RIGHTS). On that pair the caller has already written the
request (one JSON line); the zygote answers `{"pid": N}` once it forked and `{"status": S}` (a
subprocess-style return code, negative for a signal) when the child is gone. The zygote exits
when the control socket closes, after its running children have been reported.

Nothing in the preload may initialise CUDA (a process that forks after CUDA init has a broken
CUDA in the child): the zygote checks `torch.cuda.is_initialized()` and refuses to serve if so.
"""

from __future__ import annotations

import atexit
import contextlib
import ctypes
import gc
import importlib
import io
import json
import os
import selectors
import signal
import socket
import subprocess
import sys
import threading
import time
import traceback
from pathlib import Path
from typing import Any

#: imported by the zygote before it serves; the backends are best effort (cuda may be unusable here)
PRELOAD = ("klineage.gates.worker",)
PRELOAD_OPTIONAL = ("klineage.gates.emu.backend", "klineage.gates.cuda.backend")

#: Environment every gate child starts with unless the caller sets it. Torch's OpenMP threads
#: otherwise spin-wait between parallel regions; with the compilers of other gates on the same
#: cores that spinning starved the protocol (a layernorm child took 2 s instead of 0.3 s on a
#: busy 2-core box). The wait policy changes only how idle threads wait, never a result. libgomp
#: reads it once, when torch loads it, so it must be in the zygote's environment at exec too.
CHILD_ENV_DEFAULTS = {"OMP_WAIT_POLICY": "PASSIVE"}

#: how long the first run may wait for the zygote's preload (torch import) before it gives up
START_WAIT_S = 120.0
#: how long to wait for the zygote's report of a child that was killed after its time limit
REAP_WAIT_S = 30.0


# ---- caller side ----------------------------------------------------------------------------------


def with_child_defaults(env: dict[str, str]) -> dict[str, str]:
    """`env` with CHILD_ENV_DEFAULTS added where it sets nothing (a caller's own value wins)."""
    return {**CHILD_ENV_DEFAULTS, **env}


class ZygoteUnavailable(Exception):
    """The zygote could not run this child (not started, died, or hung): use a fresh interpreter."""


class _Zygote:
    """One zygote process and the caller's end of its control socket."""

    def __init__(self) -> None:
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        self.env = dict(os.environ)
        self.owner_pid = os.getpid()
        try:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "klineage.gates.zygote", str(theirs.fileno())],
                pass_fds=(theirs.fileno(),),
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                env=with_child_defaults(self.env),
                cwd="/",
            )
        finally:
            theirs.close()
        self.sock = ours

    def usable(self) -> bool:
        """Alive, started by this process and with the environment the caller has now (preloaded
        modules may have read it at import)."""
        return self.owner_pid == os.getpid() and self.proc.poll() is None and self.env == dict(os.environ)

    def submit(self, conn: socket.socket) -> None:
        socket.send_fds(self.sock, [b"r"], [conn.fileno()])

    def close(self) -> None:
        """Close the control socket: the zygote exits once its running children are reported."""
        with contextlib.suppress(OSError):
            self.sock.close()
        if self.owner_pid == os.getpid():
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.proc.wait(timeout=0.05)


_lock = threading.Lock()
_current: _Zygote | None = None


def _submit(conn: socket.socket) -> _Zygote:
    """Hand `conn` to this process's zygote, starting (or restarting) it when needed."""
    global _current
    with _lock:
        for _attempt in range(2):
            if _current is None or not _current.usable():
                if _current is not None:
                    _current.close()
                _current = _Zygote()
            try:
                _current.submit(conn)
                return _current
            except OSError:
                _current.close()
                _current = None
    raise ZygoteUnavailable("cannot reach the gate zygote")


def _drop(z: _Zygote) -> None:
    """Forget a zygote that hung, so that the next run starts a new one."""
    global _current
    with _lock:
        if _current is z:
            _current = None
    with contextlib.suppress(OSError):
        z.proc.kill()
    z.close()


@atexit.register
def _shutdown() -> None:
    if _current is not None:
        _current.close()


class _Lines:
    """JSON lines from a socket, each read against a deadline."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock, self.buf = sock, b""

    def next(self, deadline: float) -> dict[str, Any] | None:
        """The next message; None on EOF (the zygote died); TimeoutError past `deadline`."""
        while b"\n" not in self.buf:
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError
            self.sock.settimeout(left)
            try:
                chunk = self.sock.recv(4096)
            except TimeoutError:
                raise
            except OSError:
                return None
            if not chunk:
                return None
            self.buf += chunk
        line, self.buf = self.buf.split(b"\n", 1)
        return json.loads(line)


def kill_group(pid: int) -> None:
    """SIGKILL the child's process group (or the child alone if it has not called setsid yet)."""
    try:
        os.killpg(pid, signal.SIGKILL)
    except ProcessLookupError:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)


def run_forked(
    workdir: Path, payload_path: Path, result_path: Path, env: dict[str, str], timeout_s: float
) -> tuple[int, bool]:
    """Run the worker in a child forked from the zygote: (return code, timed out).

    The child writes its stdout/stderr to workdir/child.stdout and child.stderr. Raises
    ZygoteUnavailable when the zygote cannot answer (then nothing of the run is left running).
    """
    request = {"workdir": str(workdir), "payload": str(payload_path), "result": str(result_path), "env": env}
    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        ours.sendall(json.dumps(request).encode() + b"\n")
        zygote = _submit(theirs)
        theirs.close()
        lines = _Lines(ours)
        try:
            started = lines.next(time.monotonic() + max(START_WAIT_S, timeout_s))
        except TimeoutError:
            _drop(zygote)
            raise ZygoteUnavailable("the gate zygote did not start in time") from None
        if started is None:
            raise ZygoteUnavailable("the gate zygote died before forking")
        pid = int(started["pid"])
        try:
            done = lines.next(time.monotonic() + timeout_s)
        except TimeoutError:
            kill_group(pid)
            with contextlib.suppress(TimeoutError):
                lines.next(time.monotonic() + REAP_WAIT_S)
            return -signal.SIGKILL, True
        if done is None:  # the zygote died under a running child: nobody can report its status
            kill_group(pid)
            raise ZygoteUnavailable("the gate zygote died during the run")
        return int(done["status"]), False
    finally:
        ours.close()
        theirs.close()


# ---- zygote side ----------------------------------------------------------------------------------


def _preload() -> None:
    for name in PRELOAD:
        importlib.import_module(name)
    for name in PRELOAD_OPTIONAL:
        with contextlib.suppress(Exception):
            importlib.import_module(name)
    import torch

    if torch.cuda.is_initialized():
        raise SystemExit("klineage gate zygote: CUDA was initialised during the preload; refusing to fork")
    gc.collect()
    gc.freeze()  # keep the preloaded objects' pages shared with the children


def serve(ctrl: socket.socket) -> None:
    """Fork one child per request until the control socket closes and every child is reported."""
    rfd, wfd = os.pipe()
    os.set_blocking(rfd, False)
    os.set_blocking(wfd, False)
    signal.set_wakeup_fd(wfd)
    signal.signal(signal.SIGCHLD, lambda *_: None)
    sel = selectors.DefaultSelector()
    sel.register(ctrl, selectors.EVENT_READ)
    sel.register(rfd, selectors.EVENT_READ)
    children: dict[int, socket.socket] = {}
    accepting = True
    own = (ctrl, sel, rfd, wfd)
    while accepting or children:
        for key, _ in sel.select(timeout=5.0):
            if key.fileobj is ctrl:
                try:
                    msg, fds, _flags, _addr = socket.recv_fds(ctrl, 16, 4)
                except OSError:
                    msg, fds = b"", []
                if not msg and not fds:
                    accepting = False
                    sel.unregister(ctrl)
                    continue
                for fd in fds:
                    _start_child(socket.socket(fileno=fd), children, own)
            else:
                with contextlib.suppress(BlockingIOError):
                    while os.read(rfd, 4096):
                        pass
        _reap(children)


def _reap(children: dict[int, socket.socket]) -> None:
    while True:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
        conn = children.pop(pid, None)
        if conn is not None:
            with contextlib.suppress(OSError):
                conn.sendall(json.dumps({"status": os.waitstatus_to_exitcode(status)}).encode() + b"\n")
            conn.close()


def _start_child(conn: socket.socket, children: dict[int, socket.socket], own: tuple[Any, ...]) -> None:
    try:
        conn.settimeout(10.0)
        data = b""
        while not data.endswith(b"\n"):
            chunk = conn.recv(65536)
            if not chunk:
                raise OSError("request cut short")
            data += chunk
        request = json.loads(data)
    except (OSError, ValueError):
        conn.close()
        return
    sys.stdout.flush()
    sys.stderr.flush()
    pid = os.fork()
    if pid == 0:
        code = 1
        try:
            os.setsid()
            signal.set_wakeup_fd(-1)
            signal.signal(signal.SIGCHLD, signal.SIG_DFL)
            signal.signal(signal.SIGINT, signal.default_int_handler)
            for other in children.values():
                other.close()
            conn.close()
            ctrl, sel, rfd, wfd = own
            sel.close()
            ctrl.close()
            os.close(rfd)
            os.close(wfd)
            code = child_main(request)
        finally:
            os._exit(code)
    children[pid] = conn
    with contextlib.suppress(OSError):
        conn.sendall(json.dumps({"pid": pid}).encode() + b"\n")


def redirect_stdio(workdir: str) -> None:
    """A gate child's stdin from /dev/null, stdout and stderr into the run folder's capture files
    (also used by the resident worker, gates/resident.py, around each candidate)."""
    fd = os.open(os.devnull, os.O_RDONLY)
    os.dup2(fd, 0)
    os.close(fd)
    for target, name in ((1, "child.stdout"), (2, "child.stderr")):
        fd = os.open(os.path.join(workdir, name), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        os.dup2(fd, target)
        os.close(fd)


def child_main(request: dict[str, Any]) -> int:
    """In the forked child: the fresh path's process set-up, then worker.main; the exit code."""
    workdir = request["workdir"]
    os.chdir(workdir)
    redirect_stdio(workdir)
    os.environ.clear()
    os.environ.update(request["env"])
    # as PYTHONUNBUFFERED makes them: unbuffered, so output before a crash is not lost
    sys.stdout = io.TextIOWrapper(
        io.FileIO(1, "w", closefd=False),
        encoding=sys.stdout.encoding,
        errors=sys.stdout.errors,
        write_through=True,
    )
    sys.stderr = io.TextIOWrapper(
        io.FileIO(2, "w", closefd=False),
        encoding=sys.stderr.encoding,
        errors="backslashreplace",
        write_through=True,
    )
    from klineage.gates import worker

    sys.argv = [str(worker.__file__), request["payload"], request["result"]]
    sys.path[0] = workdir
    try:
        code = worker.main(sys.argv)
    except SystemExit as e:
        code = _exit_code(e)
    except BaseException:  # what an uncaught exception does to a fresh interpreter
        traceback.print_exc()
        code = 1
    with contextlib.suppress(Exception):
        sys.stdout.flush()
        sys.stderr.flush()
    with contextlib.suppress(Exception):
        ctypes.CDLL(None).fflush(None)  # the kernel's printf output, as a normal exit would
    return code


def _exit_code(e: SystemExit) -> int:
    if e.code is None:
        return 0
    if isinstance(e.code, int):
        return e.code
    print(e.code, file=sys.stderr)
    return 1


def main(argv: list[str]) -> int:
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # a Ctrl-C is the caller's to handle
    ctrl = socket.socket(fileno=int(argv[1]))
    _preload()
    serve(ctrl)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
