"""The emulator's Runner (child process): calls `launch` of a built library on CPU tensors, one
thread schedule per launch of the protocol's pair; under ASan the guard zones are poisoned."""

from __future__ import annotations

import ctypes
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch

from klineage.gates.protocol import LaunchRejected, ctypes_args
from klineage.workload import Workload


class _AsanRegions:
    """Poisons, for ASan, the bytes of each tensor's storage outside the tensor itself.

    The protocol surrounds every tensor with readable guard zones (they catch stray writes on
    every backend); under ASan those zones are made unaddressable during the launch so that
    stray reads are reported too, with the kernel's source line.
    """

    def __init__(self) -> None:
        proc = ctypes.CDLL(None)
        try:
            self.poison = getattr(proc, "__asan_poison_memory_region")  # noqa: B009 (no name mangling)
            self.unpoison = getattr(proc, "__asan_unpoison_memory_region")  # noqa: B009
        except AttributeError:
            self.poison = self.unpoison = None
        for f in (self.poison, self.unpoison):
            if f is not None:
                f.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
                f.restype = None

    def regions(self, args: Sequence[Any]) -> list[tuple[int, int]]:
        out: list[tuple[int, int]] = []
        for v in args:
            if not isinstance(v, torch.Tensor) or v.device.type != "cpu":
                continue
            st = v.untyped_storage()
            base, size = st.data_ptr(), st.nbytes()
            lo = v.data_ptr()
            hi = lo + v.numel() * v.element_size()
            if lo > base:
                out.append((base, lo - base))
            if base + size > hi:
                out.append((hi, base + size - hi))
        return out

    def apply(self, regions: list[tuple[int, int]], on: bool) -> None:
        fn = self.poison if on else self.unpoison
        if fn is None:
            return
        for addr, n in regions:
            fn(addr, n)


class EmuRunner:
    """Calls `launch` of a built library; `schedule` picks the thread order of the run. The
    launcher gets a stream handle of its own; a launch (or async copy) on any other stream,
    the default stream included, is a `side_stream` rejection, as on the GPU."""

    device = torch.device("cpu")
    schedules: Sequence[int] = (0, 1)

    def __init__(self, library: Path, workload: Workload, sanitize: bool = False) -> None:
        self.lib = ctypes.CDLL(str(library))
        self.fn = self.lib.launch
        self.fn.restype = None
        self._set = self.lib.klemu_set_schedule
        self._set.argtypes = [ctypes.c_int]
        self._set.restype = None
        self._watch = self.lib.klemu_watch_stream
        self._watch.argtypes = [ctypes.c_void_p]
        self._watch.restype = None
        self._foreign = self.lib.klemu_foreign_launches
        self._foreign.restype = ctypes.c_int
        self._first = self.lib.klemu_foreign_first
        self._first.restype = ctypes.c_char_p
        self._n_launched = self.lib.klemu_launched_count
        self._n_launched.restype = ctypes.c_int
        self._launched_name = self.lib.klemu_launched_name
        self._launched_name.argtypes = [ctypes.c_int]
        self._launched_name.restype = ctypes.c_char_p
        self.launched: set[str] = set()  # kernel instantiations launched, over every launch
        self._stream_obj = ctypes.create_string_buffer(16)  # an address no runtime stream has
        self.stream = ctypes.addressof(self._stream_obj)
        self.workload = workload
        self.asan = _AsanRegions() if sanitize else None

    def launch(self, args: Sequence[Any], schedule: int) -> None:
        self._set(int(schedule))
        self._watch(self.stream)
        cargs = ctypes_args(self.workload, args, self.stream)
        if self.asan is None:
            self.fn(*cargs)
        else:
            regions = self.asan.regions(args)
            self.asan.apply(regions, True)
            try:
                self.fn(*cargs)
            finally:
                self.asan.apply(regions, False)
        for i in range(int(self._n_launched())):
            self.launched.add(instance_of((self._launched_name(i) or b"").decode(errors="replace")))
        foreign = int(self._foreign())
        if foreign:
            first = (self._first() or b"").decode(errors="replace")
            raise LaunchRejected(
                "side_stream",
                f"{foreign} launch{'' if foreign == 1 else 'es'} on a stream other than the launch stream "
                f"({first}, launch stream {self.stream:#x}): work on a side stream, or a launcher that ignores "
                "its cudaStream_t argument",
            )


def instance_of(pretty: str) -> str:
    """`k<32, false>` out of g++'s "const char* klemu::instance_name() [with auto F = k<32, false>]"
    (a kernel name as written when the launch did not name the instantiation)."""
    head, sep, rest = pretty.partition("[with auto F = ")
    return rest[:-1] if sep and rest.endswith("]") else pretty
