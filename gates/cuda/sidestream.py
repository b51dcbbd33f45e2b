"""Work that escapes the timed window: one repetition traced with CUPTI (torch.profiler).

The launch stream carries: marker kernel, start event, the candidate, end event, marker kernel.
Every device activity (kernel, memcpy, memset) in the trace must be a marker or lie on the launch
stream between the two markers. Activity on another stream (a side stream, the legacy default
stream of a launcher that ignores its stream argument) or after the closing marker (a host
thread or a deferred launch) is a `side_stream` rejection. The summed CUPTI durations inside the
window are reported beside the event time. `analyze` is pure and CPU-tested.
"""

from __future__ import annotations

import json
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from klineage.gates.cuda.support import MARKER_KERNEL

DEVICE_CATEGORIES = ("kernel", "gpu_memcpy", "gpu_memset")
#: slack (us) between the CUPTI timestamps of consecutive activities on one stream
SLACK_US = 2.0


@dataclass(frozen=True)
class Activity:
    name: str
    category: str
    stream: int | None
    start_us: float
    dur_us: float

    @property
    def end_us(self) -> float:
        return self.start_us + self.dur_us

    @property
    def is_marker(self) -> bool:
        return MARKER_KERNEL in self.name


@dataclass
class WindowReport:
    traced: bool
    launch_stream: int | None = None
    inside: list[Activity] = field(default_factory=list)
    foreign: list[Activity] = field(default_factory=list)
    outside: list[Activity] = field(default_factory=list)
    window_us: float = 0.0
    note: str = ""
    #: the CUDA-event time of the traced launch (ms), None when not measured
    event_ms: float | None = None

    @property
    def ok(self) -> bool:
        return not self.foreign and not self.outside

    @property
    def kernel_ms(self) -> float:
        return sum(a.dur_us for a in self.inside) / 1000.0

    def message(self) -> str:
        parts = []
        if self.foreign:
            a = self.foreign[0]
            parts.append(
                f"{len(self.foreign)} device activit{'y' if len(self.foreign) == 1 else 'ies'} on a stream other than "
                f"the launch stream ({a.category} '{_short(a.name)}' on stream {a.stream}, launch stream "
                f"{self.launch_stream}): work on a side stream, or a launcher that ignores its cudaStream_t argument"
            )
        if self.outside:
            a = self.outside[0]
            parts.append(
                f"{len(self.outside)} device activit{'y' if len(self.outside) == 1 else 'ies'} after the timed window "
                f"closed ({a.category} '{_short(a.name)}'): a deferred launch or a host thread"
            )
        return "; ".join(parts) or "all device work inside the timed window on the launch stream"

    def to_dict(self) -> dict[str, Any]:
        return {
            "traced": self.traced,
            "launch_stream": self.launch_stream,
            "kernels_inside": [_short(a.name) for a in self.inside],
            "foreign": [f"{a.category}:{_short(a.name)}@stream{a.stream}" for a in self.foreign],
            "outside": [f"{a.category}:{_short(a.name)}" for a in self.outside],
            "cupti_kernel_ms": self.kernel_ms,
            "cupti_window_ms": self.window_us / 1000.0,
            "note": self.note,
        }


def _short(name: str, n: int = 80) -> str:
    return name if len(name) <= n else name[: n - 3] + "..."


def activities(trace: dict[str, Any]) -> list[Activity]:
    """Device activities of a chrome trace exported by torch.profiler."""
    out: list[Activity] = []
    for ev in trace.get("traceEvents", []):
        if not isinstance(ev, dict) or ev.get("ph") != "X" or ev.get("cat") not in DEVICE_CATEGORIES:
            continue
        args = ev.get("args") or {}
        stream = args.get("stream")
        out.append(
            Activity(
                name=str(ev.get("name", "")),
                category=str(ev["cat"]),
                stream=int(stream)
                if isinstance(stream, int | float | str) and str(stream).lstrip("-").isdigit()
                else None,
                start_us=float(ev.get("ts", 0.0)),
                dur_us=float(ev.get("dur", 0.0)),
            )
        )
    return sorted(out, key=lambda a: a.start_us)


def analyze(acts: list[Activity]) -> WindowReport:
    """Split the traced activities into inside / foreign / outside the marked window."""
    markers = [a for a in acts if a.is_marker]
    if len(markers) < 2:
        return WindowReport(
            traced=False, note=f"CUPTI trace has {len(markers)} of 2 window markers: not checked"
        )
    opening, closing = markers[0], markers[-1]
    stream = opening.stream
    report = WindowReport(
        traced=True, launch_stream=stream, window_us=max(0.0, closing.start_us - opening.end_us)
    )
    for a in acts:
        if a.is_marker:
            continue
        if a.stream != stream:
            report.foreign.append(a)
        elif a.start_us + SLACK_US < opening.end_us or a.end_us > closing.start_us + SLACK_US:
            report.outside.append(a)
        else:
            report.inside.append(a)
    return report


def trace_one(
    launch: Any,
    marker: Any,
    stream: Any,
    settle_s: float = 0.05,
    keep: Path | None = None,
    before: Callable[[], None] | None = None,
) -> WindowReport:
    """Trace marker, events, `launch()`, events, marker on `stream` (GPU), then wait `settle_s`
    so deferred work lands in the trace too. `before()` (a refill and L2 flush) runs and
    finishes before tracing starts: its copies are not the candidate's work."""
    import torch
    from torch.profiler import ProfilerActivity, profile

    if before is not None:
        with torch.cuda.stream(stream):
            before()
    torch.cuda.synchronize()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        with torch.cuda.stream(stream):
            marker(1, stream.cuda_stream)
            start.record(stream)
            launch()
            end.record(stream)
            marker(2, stream.cuda_stream)
        torch.cuda.synchronize()
        time.sleep(settle_s)
        torch.cuda.synchronize()
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "trace.json"
        prof.export_chrome_trace(str(path))
        trace = json.loads(path.read_text())
        if keep is not None:
            keep.write_text(path.read_text())
    report = analyze(activities(trace))
    report.event_ms = start.elapsed_time(end)
    report.note = (report.note + f"; event time {report.event_ms:.4g} ms").lstrip("; ")
    return report
