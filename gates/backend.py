"""The interface every gate backend module implements (gates/emu/backend.py, gates/cuda/backend.py).

The parent process builds (never runs) the candidate; the child process (gates/worker.py) makes a
Runner, runs the shared correctness protocol (gates/protocol.py) and, when it passes, the
backend's profile stage. A child that dies is classified by the backend from its exit status and
stderr.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:  # torch: not imported by whoever only builds or reads a cached verdict
    from klineage.gates.protocol import Runner
    from klineage.workload import Workload


@dataclass
class GateOptions:
    """Knobs of one gate run; part of the cache key (see `key_fields`)."""

    backend: str = "emu"
    shape_set: str = ""  # "" = the backend's default (emu: "emu", cuda: "test")
    seeds: tuple[int, ...] = (0, 1)
    arch: str = "sm_90a"
    nvcc_flags: tuple[str, ...] = ("-O3", "-std=c++17")
    timeout_s: float = 120.0
    sanitize: bool = False
    time_kernel: bool = True  # cuda: time at the bench shapes after correctness
    ncu: bool = False
    energy: bool = False
    extra: dict[str, Any] = field(default_factory=dict)

    def key_fields(self) -> dict[str, Any]:
        return {
            "backend": self.backend,
            "shape_set": self.shape_set,
            "seeds": list(self.seeds),
            "arch": self.arch,
            "nvcc_flags": list(self.nvcc_flags),
            "sanitize": self.sanitize,
            "time_kernel": self.time_kernel,
            "ncu": self.ncu,
            "energy": self.energy,
            "extra": self.extra,
        }


@dataclass
class BuildOutcome:
    """Result of building a candidate for a backend. category: ok | unsupported | compile_error."""

    ok: bool
    category: str = "ok"
    message: str = ""
    library: Path | None = None
    log: str = ""
    elapsed_s: float = 0.0


@dataclass
class ProfileOutcome:
    """What the profile stage adds. A non-ok category (side_stream, suspicious) rejects."""

    category: str = "ok"
    message: str = ""
    timing: dict[str, Any] | None = None
    profile: dict[str, Any] = field(default_factory=dict)


class Backend(Protocol):
    NAME: str
    DEFAULT_SHAPE_SET: str

    def toolchain(self) -> str:
        """Compiler identity for the cache key (e.g. 'g++ 12.2.0')."""

    def build(self, source: str, workdir: Path, options: GateOptions) -> BuildOutcome:
        """Compile `source` in `workdir` (parent process, with a time limit)."""

    def make_runner(self, library: Path, workload: Workload, options: GateOptions) -> Runner:
        """Load the built library in the child process."""

    def profile(self, runner: Runner, workload: Workload, options: GateOptions) -> ProfileOutcome | None:
        """Child process, after correctness passed: timing and profiler metrics, or None."""

    def classify_failure(self, returncode: int, stderr: str) -> tuple[str, str] | None:
        """Parent process: (category, message) for a child that died, or None for generic crash."""

    def child_env(self, options: GateOptions) -> dict[str, str]:
        """Extra environment for the child process."""
