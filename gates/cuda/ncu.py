"""A short Nsight Compute metric set for the candidate's kernels (`--ncu`).

ncu wraps the probe (one launch at the bench shape between cudaProfilerStart/Stop) with
`--clock-control none` (the card's clocks are left alone) and prints CSV. The parser is pure and
tested in CI on a sample recorded on the H200 (tests/data/ncu_raw_sample.csv); it reads both the
wide `--page raw` layout and the long `details` layout (one metric per row).
"""

from __future__ import annotations

import csv
import io
import re
import shutil
import subprocess
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

METRICS = {
    "duration_ns": "gpu__time_duration.sum",
    "achieved_occupancy_pct": "sm__warps_active.avg.pct_of_peak_sustained_active",
    "dram_throughput_pct": "dram__throughput.avg.pct_of_peak_sustained_elapsed",
    "sm_throughput_pct": "sm__throughput.avg.pct_of_peak_sustained_elapsed",
    "l2_hit_rate_pct": "lts__t_sector_hit_rate.pct",
}
STALL_REGEX = r"regex:smsp__average_warps_issue_stalled_.*_per_issue_active\.ratio"
_STALL = re.compile(r"smsp__average_warps_issue_stalled_(?P<reason>\w+?)_per_issue_active\.ratio$")
#: the same numbers from whole sections, for an ncu that refuses the metric list
FALLBACK_SECTIONS = ("SpeedOfLight", "Occupancy", "MemoryWorkloadAnalysis", "WarpStateStats", "LaunchStats")
_UNIT_SCALE_NS = {
    "nsecond": 1.0,
    "ns": 1.0,
    "usecond": 1e3,
    "us": 1e3,
    "msecond": 1e6,
    "ms": 1e6,
    "second": 1e9,
    "s": 1e9,
}


def ncu_command(probe: Sequence[str], ncu: str = "ncu", sections: bool = False) -> list[str]:
    cmd = [ncu, "--clock-control", "none", "--profile-from-start", "off", "--csv", "--page", "raw"]
    if sections:
        for s in FALLBACK_SECTIONS:
            cmd += ["--section", s]
    else:
        cmd += ["--metrics", ",".join([*METRICS.values(), STALL_REGEX])]
    return cmd + list(probe)


@dataclass
class KernelMetrics:
    kernel: str
    values: dict[str, float] = field(default_factory=dict)
    units: dict[str, str] = field(default_factory=dict)


@dataclass
class NcuSummary:
    kernel: str
    kernels_profiled: int
    duration_us: float | None = None
    achieved_occupancy_pct: float | None = None
    dram_throughput_pct: float | None = None
    sm_throughput_pct: float | None = None
    l2_hit_rate_pct: float | None = None
    top_stalls: list[tuple[str, float]] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["top_stalls"] = [{"reason": r, "cycles_per_issue": v} for r, v in self.top_stalls]
        return d


def number(text: str) -> float | None:
    """ncu prints '1,234.5', 'n/a' or ''; only the first is a number."""
    t = text.strip().replace(",", "")
    try:
        return float(t)
    except ValueError:
        return None


def _csv_rows(text: str) -> list[list[str]]:
    lines = text.splitlines()
    start = next((i for i, ln in enumerate(lines) if ln.startswith('"ID"')), None)
    if start is None:
        return []
    body = [ln for ln in lines[start:] if ln.startswith('"')]
    return list(csv.reader(io.StringIO("\n".join(body))))


def parse_csv(text: str) -> list[KernelMetrics]:
    """Per-kernel metric values from ncu's CSV output (stdout with ==PROF== lines is fine)."""
    rows = _csv_rows(text)
    if not rows:
        return []
    header = rows[0]
    if "Metric Name" in header and "Metric Value" in header:
        return _parse_long(header, rows[1:])
    return _parse_wide(header, rows[1:])


def _parse_wide(header: list[str], rows: list[list[str]]) -> list[KernelMetrics]:
    kname = header.index("Kernel Name") if "Kernel Name" in header else None
    first_metric = next((i for i, h in enumerate(header) if "__" in h), len(header))
    units: dict[str, str] = {}
    out: list[KernelMetrics] = []
    for row in rows:
        if not row or len(row) < len(header):
            continue
        if not row[0].strip().isdigit():  # the units row
            units = {header[i]: row[i] for i in range(first_metric, len(header))}
            continue
        km = KernelMetrics(row[kname] if kname is not None else f"kernel {row[0]}", units=dict(units))
        for i in range(first_metric, len(header)):
            v = number(row[i])
            if v is not None:
                km.values[header[i]] = v
        out.append(km)
    return out


def _parse_long(header: list[str], rows: list[list[str]]) -> list[KernelMetrics]:
    col = {h: i for i, h in enumerate(header)}
    by_id: dict[str, KernelMetrics] = {}
    for row in rows:
        if len(row) < len(header) or not row[col["ID"]].strip().isdigit():
            continue
        km = by_id.setdefault(row[col["ID"]], KernelMetrics(row[col.get("Kernel Name", 0)]))
        v = number(row[col["Metric Value"]])
        if v is not None:
            name = row[col["Metric Name"]]
            km.values[name] = v
            km.units[name] = row[col["Metric Unit"]] if "Metric Unit" in col else ""
    return list(by_id.values())


def duration_ns(km: KernelMetrics) -> float | None:
    name = METRICS["duration_ns"]
    v = km.values.get(name)
    if v is None:
        return None
    return v * _UNIT_SCALE_NS.get(km.units.get(name, "nsecond").strip(), 1.0)


def summarize(kernels: list[KernelMetrics], exclude: Sequence[str] = ()) -> NcuSummary | None:
    """The longest-running profiled kernel's short metric set, with its top three stall reasons
    (average cycles per issued instruction a warp spends stalled for each reason)."""
    ks = [k for k in kernels if not any(x in k.kernel for x in exclude)]
    if not ks:
        return None
    k = max(ks, key=lambda km: duration_ns(km) or 0.0)
    stalls = []
    for name, v in k.values.items():
        m = _STALL.search(name)
        if m and not m.group("reason").endswith("_not_issued") and m.group("reason") not in ("selected",):
            stalls.append((m.group("reason"), v))
    stalls.sort(key=lambda rv: -rv[1])
    d = duration_ns(k)
    return NcuSummary(
        kernel=k.kernel,
        kernels_profiled=len(ks),
        duration_us=d / 1000.0 if d is not None else None,
        achieved_occupancy_pct=k.values.get(METRICS["achieved_occupancy_pct"]),
        dram_throughput_pct=k.values.get(
            METRICS["dram_throughput_pct"],
            k.values.get("gpu__dram_throughput.avg.pct_of_peak_sustained_elapsed"),
        ),
        sm_throughput_pct=k.values.get(METRICS["sm_throughput_pct"]),
        l2_hit_rate_pct=k.values.get(METRICS["l2_hit_rate_pct"]),
        top_stalls=stalls[:3],
    )


@dataclass
class NcuRun:
    returncode: int
    output: str
    summary: NcuSummary | None
    command: list[str]
    timed_out: bool = False


def run(
    probe: Sequence[str], timeout_s: float, env: dict[str, str] | None = None, exclude: Sequence[str] = ()
) -> NcuRun:
    """ncu over the probe with the metric list; once more with whole sections if that fails."""
    ncu = shutil.which("ncu")
    if not ncu:
        return NcuRun(-1, "ncu not found on PATH", None, [])
    last: NcuRun | None = None
    for sections in (False, True):
        cmd = ncu_command(probe, ncu, sections=sections)
        try:
            proc = subprocess.run(
                cmd, capture_output=True, text=True, errors="replace", timeout=timeout_s, env=env, check=False
            )
        except subprocess.TimeoutExpired:
            return NcuRun(-9, "ncu timed out", None, cmd, timed_out=True)
        output = proc.stdout + "\n" + proc.stderr
        summary = summarize(parse_csv(proc.stdout), exclude)
        last = NcuRun(proc.returncode, output, summary, cmd)
        if summary is not None:
            return last
    assert last is not None
    return last
