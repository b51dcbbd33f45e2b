"""Load a built candidate with ctypes and call its launcher on torch CUDA tensors (child process).

Errors are raised, never swallowed: a launch error (read from the library's own CUDA runtime, see
gates/cuda/support.py) or an asynchronous fault (illegal address, trap) becomes a CudaKernelError
whose message carries the CUDA error name, so the gate reports it in words.
"""

from __future__ import annotations

import ctypes
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch

from klineage.gates.protocol import ctypes_args
from klineage.workload import Workload


class CudaKernelError(RuntimeError):
    """The candidate's launch failed or its kernel faulted; the CUDA context may be unusable."""


class CandidateLibrary:
    """The ctypes view of one built candidate: the launcher and the support functions."""

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self.lib = ctypes.CDLL(str(self.path))
        self.launch = self.lib.launch
        self.launch.restype = None
        self._last_error = self.lib.klineage_last_error
        self._last_error.restype = ctypes.c_int
        self._last_error.argtypes = []
        self._name = self.lib.klineage_error_name
        self._name.restype = ctypes.c_char_p
        self._name.argtypes = [ctypes.c_int]
        self._string = self.lib.klineage_error_string
        self._string.restype = ctypes.c_char_p
        self._string.argtypes = [ctypes.c_int]
        self._marker = self.lib.klineage_marker
        self._marker.restype = ctypes.c_int
        self._marker.argtypes = [ctypes.c_int, ctypes.c_void_p]

    def describe(self, code: int) -> str:
        name = (self._name(code) or b"?").decode(errors="replace")
        text = (self._string(code) or b"?").decode(errors="replace")
        return f"{name} ({text})"

    def take_error(self) -> int:
        """cudaGetLastError of the library's runtime (clears non-sticky errors)."""
        return int(self._last_error())

    def marker(self, tag: int, stream: int) -> None:
        """Launch the tiny marker kernel on `stream` (brackets the timed window in traces)."""
        code = int(self._marker(tag, ctypes.c_void_p(stream)))
        if code:
            raise CudaKernelError(f"marker launch failed: {self.describe(code)}")


class CudaRunner:
    """The protocol's Runner for the GPU: both launches of a pair use the same 'schedule'."""

    schedules: Sequence[int] = (0, 0)

    def __init__(self, library: Path, workload: Workload, device: torch.device | None = None) -> None:
        if not torch.cuda.is_available():
            raise CudaKernelError("no CUDA GPU visible to torch: the cuda backend cannot run here")
        self.device = device or torch.device("cuda", torch.cuda.current_device())
        self.workload = workload
        self.library = CandidateLibrary(library)

    @property
    def stream(self) -> torch.cuda.Stream:
        return torch.cuda.current_stream(self.device)

    def launch_async(self, args: Sequence[Any], stream: int | None = None) -> None:
        """Call the launcher on `stream` (default: torch's current stream) and check that the
        launch itself succeeded; no synchronization, so this can sit inside a timed window."""
        handle = self.stream.cuda_stream if stream is None else stream
        self.library.launch(*ctypes_args(self.workload, args, handle))
        code = self.library.take_error()
        if code:
            raise CudaKernelError(f"kernel launch failed: {self.library.describe(code)}")

    def synchronize(self) -> None:
        """Wait for the device; an asynchronous fault (illegal address, trap) raises here."""
        try:
            torch.cuda.synchronize(self.device)
        except RuntimeError as e:
            raise CudaKernelError(f"kernel faulted on the device: {_first_line(str(e))}") from None
        code = self.library.take_error()
        if code:
            raise CudaKernelError(f"kernel failed: {self.library.describe(code)}")

    def launch(self, args: Sequence[Any], schedule: int) -> None:
        """The protocol's call: launch on the current stream and wait for the result."""
        self.launch_async(args)
        self.synchronize()


def _first_line(text: str) -> str:
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    return lines[0] if lines else text
