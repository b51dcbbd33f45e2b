"""One gate child at a time per GPU. Timings taken while another gate's kernels share the device
are not the kernel's own, and the executors run several gates at once (`--workers`, concurrent
walks, Ray tasks), so every cuda gate child holds an exclusive lock on its device for its whole
life; builds (nvcc, the library) stay parallel. The lock is taken by the parent before the child
starts, so waiting never counts against the child's time limit and the parent never touches CUDA.

The device is named by CUDA_VISIBLE_DEVICES (Ray gives each GPU task its own), else `all`: on a
host without it every cuda gate shares one slot. The lock is an flock on a file under
$KLINEAGE_GPU_LOCK_DIR or the system temporary folder, shared by every process and every
KLineage home on the host; the kernel releases it if the holder dies.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import re
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path


def lock_path(env: dict[str, str] | None = None) -> Path:
    env = dict(os.environ) if env is None else env
    devices = env.get("CUDA_VISIBLE_DEVICES", "").strip() or "all"
    root = Path(env.get("KLINEAGE_GPU_LOCK_DIR") or Path(tempfile.gettempdir()) / "klineage-gpu-locks")
    return root / f"gpu-{re.sub(r'[^0-9A-Za-z_.-]', '_', devices)}.lock"


@contextlib.contextmanager
def device_slot(env: dict[str, str] | None = None) -> Iterator[float]:
    """Hold the device exclusively; yields the seconds spent waiting for it."""
    path = lock_path(env)
    path.parent.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    with open(path, "a+") as fh:  # a new open file description per holder: flock excludes threads too
        fcntl.flock(fh.fileno(), fcntl.LOCK_EX)
        try:
            yield time.perf_counter() - t0
        finally:
            fcntl.flock(fh.fileno(), fcntl.LOCK_UN)


def is_held(env: dict[str, str] | None = None) -> bool:
    """Whether some holder has the device now (a try that does not wait); for tests and
    diagnostics, never for taking turns (that is `device_slot`)."""
    path = lock_path(env)
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a+") as fh:
        try:
            fcntl.flock(fh.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return True
        fcntl.flock(fh.fileno(), fcntl.LOCK_UN)
        return False
