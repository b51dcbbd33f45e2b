"""The gate's verdict: typed, JSON-serialisable, the same for every backend."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

#: a gate verdict's category (not an operator family: those are klineage.deopt.base.CATEGORIES)
VERDICT_CATEGORIES = (
    "ok",
    "parse_error",
    "compile_error",
    "unsupported",
    "crash",
    "timeout",
    "mismatch",
    "unwritten_output",
    "input_mutated",
    "nondeterministic",
    "out_of_bounds",
    "side_stream",
    "suspicious",
)
STAGES = ("parse", "compile", "run", "correctness", "profile", "done")


def instance_key(name: str) -> str:
    """A kernel instantiation's name without return type, namespaces and parameters, so that
    ptxas's demangled `void (anonymous namespace)::k<32, false>(float const*, int)` and the
    emulator's `{anonymous}::k<32, false>` are both `k<32, false>`."""
    name = name.replace("(anonymous namespace)::", "").replace("{anonymous}::", "").strip()
    depth, cut = 0, len(name)
    for i, ch in enumerate(name):  # the parameter list: the first '(' outside template brackets
        if ch == "<":
            depth += 1
        elif ch == ">":
            depth -= 1
        elif ch == "(" and depth == 0 and i > 0:
            cut = i
            break
    head = name[:cut].strip()
    depth, start = 0, 0
    for i, ch in enumerate(
        head
    ):  # the return type and namespaces: what precedes the last top-level ' ' or '::'
        if ch == "<":
            depth += 1
        elif ch == ">":
            depth -= 1
        elif depth == 0 and (ch == " " or (ch == ":" and head[i - 1 : i + 1] == "::")):
            start = i + 1
    return head[start:]


def launched_resources(result: dict[str, Any]) -> dict[str, Any]:
    """The resources of the kernel instantiations a gate run launched (the emu backend records
    them in `profile["launched"]`); all of them when the run recorded none, or none matched."""
    res = result.get("resources") or {}
    launched = {instance_key(n) for n in (result.get("profile") or {}).get("launched") or []}
    picked = {k: v for k, v in res.items() if instance_key(k) in launched}
    return picked or res


@dataclass
class Resources:
    """Per-kernel resources from `ptxas -v`."""

    registers: int = 0
    shared_bytes: int = 0
    spill_stores: int = 0
    spill_loads: int = 0
    stack_bytes: int = 0
    barriers: int = 0
    constant_bytes: int = 0


@dataclass
class ShapeCheck:
    """The correctness outcome of one (shape, seed, output)."""

    shape: dict[str, int]
    seed: int
    output: str
    ok: bool
    max_abs: float = 0.0
    max_rel: float = 0.0
    first_bad_index: list[int] | None = None
    note: str = ""


@dataclass
class Timing:
    """GPU timing, milliseconds; medians of trial medians with the spread."""

    median_ms: float
    min_ms: float
    max_ms: float
    trials: int
    reps_per_trial: int
    reference_median_ms: float | None = None
    reference_min_ms: float | None = None
    reference_max_ms: float | None = None
    cupti_kernel_ms: float | None = None
    shape: dict[str, int] = field(default_factory=dict)
    bandwidth_fraction: float | None = None
    flops_fraction: float | None = None
    extra: dict[str, Any] = field(default_factory=dict)


@dataclass
class GateResult:
    accepted: bool
    stage: str
    category: str
    message: str = ""
    backend: str = "emu"
    shapes: list[ShapeCheck] = field(default_factory=list)
    resources: dict[str, Resources] = field(default_factory=dict)
    timing: Timing | None = None
    profile: dict[str, Any] = field(default_factory=dict)
    artifact_id: str = ""
    cached: bool = False
    elapsed_s: float = 0.0
    #: wall seconds per stage of this gate (nvcc_s, build_s, compile_s, device_wait_s, run_s and
    #: the worker's phases as worker_<phase>): where a candidate's time went (a cached verdict
    #: keeps those of the run that produced it)
    stages_s: dict[str, float] = field(default_factory=dict)
    #: the artifact id of the gate whose verdict this one reuses: a candidate whose built code is
    #: identical to that one's (gates/twins.py), not run on the device again
    twin_of: str = ""

    def __post_init__(self) -> None:
        if self.category not in VERDICT_CATEGORIES:
            raise ValueError(f"unknown gate category {self.category!r}")
        if self.stage not in STAGES:
            raise ValueError(f"unknown gate stage {self.stage!r}")
        if self.accepted and self.category != "ok":
            raise ValueError("an accepted result must have category 'ok'")

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> GateResult:
        d = dict(d)
        d["shapes"] = [ShapeCheck(**s) for s in d.get("shapes", [])]
        d["resources"] = {k: Resources(**v) for k, v in d.get("resources", {}).items()}
        d["timing"] = Timing(**d["timing"]) if d.get("timing") else None
        return cls(**d)

    @classmethod
    def reject(cls, stage: str, category: str, message: str, **kw: Any) -> GateResult:
        return cls(accepted=False, stage=stage, category=category, message=message, **kw)
