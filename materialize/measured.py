"""GPU times measured outside the loop, for the judge of a run gated on the CPU.

A `cuda` gate per candidate costs about 20 s on the H200 (a child process that builds, checks,
profiles and times one kernel), so the loop's GPU rule over a corpus of runs costs hours. The
same decisions come cheaper in rounds: run the loop on the emulator, time every candidate it gated
on the GPU in one process (`klineage timings bench`: the correctness protocol on the
test shapes, then the gate's timing at the bench shape), and run the loop again with those times.
Wherever the current kernel and a candidate both have a measured time, the judge applies the GPU
rule (faster by more than the larger spread of the two), as a `cuda` loop measuring the same
numbers would; a candidate without one is judged by the CPU rule and listed in the run's
`unmeasured`, for the next round to time. A round that lists none made the GPU loop's decisions.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from klineage.gates.result import Timing
from klineage.source.digest import source_hash
from klineage.timings import TimingsError, read_bench


@dataclass(frozen=True)
class MeasuredTimes:
    """(workload, source hash) -> GPU timing at the workload's bench shape, one device."""

    device: str
    times: dict[tuple[str, str], Timing] = field(default_factory=dict)
    files: tuple[str, ...] = ()

    def lookup(self, workload: str, text: str) -> Timing | None:
        return self.times.get((workload, source_hash(text)))

    def __len__(self) -> int:
        return len(self.times)


def _timing(k: dict[str, Any], row: dict[str, Any], device: str, stamp: str, path: Path) -> Timing:
    ms = float(k["ms"])
    trials = [float(x) for x in k.get("trial_ms") or [] if isinstance(x, int | float)]
    lo = float(k["min_ms"]) if isinstance(k.get("min_ms"), int | float) else min(trials, default=ms)
    hi = float(k["max_ms"]) if isinstance(k.get("max_ms"), int | float) else max(trials, default=ms)
    torch_ms = row.get("torch_ms") if isinstance(row.get("torch_ms"), int | float) else None
    return Timing(
        ms,
        lo,
        hi,
        max(len(trials), 1),
        0,
        reference_median_ms=torch_ms,
        shape=dict(row.get("bench") or {}),
        extra={"trial_medians_ms": trials, "device": device, "measured": f"{path.name} ({stamp})"},
    )


def _pooled(ts: list[Timing]) -> Timing:
    """One kernel timed by several judge processes: the median of their medians, and as its trials
    every process's trials together, so that its spread covers the spread inside each process and
    the difference between them (the same kernel of a second a launch: 7385-7483 ms over five
    processes of one H100); the judge does not decide on either."""
    if len(ts) == 1:
        return ts[0]
    trials = [x for t in ts for x in (t.extra.get("trial_medians_ms") or [t.median_ms])]
    first = ts[0]
    return Timing(
        statistics.median(t.median_ms for t in ts),
        min(t.min_ms for t in ts),
        max(t.max_ms for t in ts),
        sum(t.trials for t in ts),
        0,
        reference_median_ms=first.reference_median_ms,
        shape=first.shape,
        extra={
            "trial_medians_ms": sorted(trials),
            "device": first.extra.get("device"),
            "measured": "; ".join(str(t.extra.get("measured")) for t in ts),
        },
    )


def read_measured(paths: list[Path]) -> MeasuredTimes:
    """Every kernel whose check passed and that has a time, from `klineage timings bench` JSON
    files of one device; a kernel several files time is pooled (`_pooled`)."""
    found: dict[tuple[str, str], list[Timing]] = {}
    devices: set[str] = set()
    for path in paths:
        doc = read_bench(path)  # one line naming the file when it is not such a result
        device, stamp = str(doc["device"]), str(doc.get("date", ""))
        devices.add(device)
        for row in doc["rows"]:
            for digest, k in row["kernels"].items():
                ms = k.get("ms") if isinstance(k, dict) else None
                if isinstance(k, dict) and k.get("check") == "ok" and isinstance(ms, int | float) and ms > 0:
                    found.setdefault((row["name"], digest), []).append(_timing(k, row, device, stamp, path))
    if len(devices) > 1:
        raise TimingsError(
            f"{', '.join(map(str, paths))}: times of several devices ({', '.join(sorted(devices))}); "
            "the judge compares times of one"
        )
    times = {key: _pooled(ts) for key, ts in found.items()}
    if not times:
        raise TimingsError(f"{', '.join(map(str, paths))}: no kernel with a passed check and a time")
    return MeasuredTimes(devices.pop(), times, tuple(map(str, paths)))
