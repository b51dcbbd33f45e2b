"""GPU times of lineage states, measured outside the gate, as the effects of skills mined on the CPU.

A `cuda` gate times the kernel it checks, but each gate is a child process that builds, checks,
profiles and times one kernel (about 20 s on the H200), so a whole corpus mined on the GPU costs
hours of device time. Mined on the CPU emulator instead, every skill's time effect is
`unmeasured`. This module closes the gap in two moves:

1. `export_states`: every state of every lineage in a store, written as `DIR/WORKLOAD/HASH.cu`
   with `DIR/index.json` listing them (the file name is the state hash: the SHA-256 of its text).
2. On the GPU, `klineage timings bench --suite corpus --extra DIR/index.json` builds all
   of them in parallel, checks each with the correctness protocol on the test shapes and times it
   at the bench shape beside torch, in one process. `import_timings` reads its JSON: a kernel
   whose check passed and whose digest is a state of that workload, or its naive kernel, becomes a
   `kernel_timings` row (device, median, torch in the same run, the shape); then the skills of
   those workloads are extracted again, so each step's effect is the measured ratio of its two
   states' times, and `klineage lineage` gives the lineage's coverage (DESIGN.md).

Digests that are neither (states of an older mine, other kernels) are counted and skipped.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from klineage.errors import KLineageError
from klineage.store import lineage as lineage_rows
from klineage.store.db import Store
from klineage.store.timings import TimingRow, put_timings, timing_rows


class TimingsError(KLineageError):
    """A timings file that cannot be imported (what was wrong, where)."""


@dataclass(frozen=True)
class KernelTime:
    kernel_hash: str
    device: str
    median_ms: float
    torch_ms: float | None = None


@dataclass
class ImportReport:
    source: str
    device: str
    measured_at: str
    imported: dict[str, int] = field(default_factory=dict)  # workload -> states timed
    not_states: int = (
        0  # timed kernels that are neither a state nor a naive kernel of the store (older mines)
    )
    not_ok: int = 0  # kernels whose check failed or that were not timed
    refreshed: list[str] = field(default_factory=list)  # workloads whose skills were extracted again
    not_refreshed: dict[str, str] = field(default_factory=dict)  # workload -> why


def export_states(
    store: Store, out_dir: Path, workloads: list[str] | None = None, *, untimed: bool = False
) -> dict[str, Any]:
    """Write every state's source and the index `klineage timings bench --extra` reads; returns the index.

    `untimed`: only the states with no imported GPU time (what a re-mine left untimed), deepest
    first, so that a bench cut off by its deadline has timed the roots that lineage coverage needs."""
    rows = lineage_rows.state_sources(store)
    known = sorted({r.workload for r in rows})
    if workloads:
        unknown = sorted(set(workloads) - set(known))
        if unknown:
            raise TimingsError(
                f"no lineage for {', '.join(unknown)} in {store.path} (known: {', '.join(known) or 'none'})"
            )
        rows = [r for r in rows if r.workload in workloads]
    if not rows:
        raise TimingsError(f"{store.path}: no lineage states to export (mine first)")
    if untimed:
        timed = {(w, t["kernel_hash"]) for w in {r.workload for r in rows} for t in timing_rows(store, w)}
        rows = sorted(
            (r for r in rows if (r.workload, r.state_hash) not in timed), key=lambda r: (r.workload, -r.depth)
        )
    files: dict[str, list[str]] = {}
    for r in rows:
        rel = f"{r.workload}/{r.state_hash}.cu"
        path = out_dir / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(r.source)
        files.setdefault(r.workload, []).append(rel)
    index = {"kind": "lineage-states", "db": str(store.path), "files": files}
    (out_dir / "index.json").write_text(json.dumps(index, indent=1))
    return index


def read_bench(path: Path) -> dict[str, Any]:
    """The JSON of materialized_bench.py, checked for the fields an import needs."""
    try:
        doc = json.loads(path.read_text())
    except OSError as e:
        raise TimingsError(f"{path}: cannot read ({e.strerror or e})") from None
    except json.JSONDecodeError as e:
        raise TimingsError(f"{path}: not JSON (line {e.lineno}: {e.msg})") from None
    if not isinstance(doc, dict) or not isinstance(doc.get("rows"), list) or not doc.get("device"):
        raise TimingsError(f"{path}: not a materialized_bench.py result (needs 'device' and a list 'rows')")
    for i, row in enumerate(doc["rows"]):
        if (
            not isinstance(row, dict)
            or not isinstance(row.get("name"), str)
            or not isinstance(row.get("kernels"), dict)
        ):
            raise TimingsError(f"{path}: rows[{i}] needs a 'name' and a 'kernels' object")
    return doc


def import_timings(store: Store, paths: list[Path], refresh: bool = True) -> ImportReport:
    """Store the times of the states (and naive kernels) the files measured, all in one transaction
    after every file has been read and checked; then extract the skills of those workloads again
    (their effects read the new times). A later file wins where two time the same kernel."""
    docs = [(path, read_bench(path)) for path in paths]
    devices = sorted({str(doc["device"]) for _, doc in docs})
    report = ImportReport(
        source=", ".join(map(str, paths)),
        device=", ".join(devices),
        measured_at=", ".join(sorted({str(doc.get("date", "")) for _, doc in docs})),
    )
    known = lineage_rows.timeable_kernels(store)
    values: dict[tuple[str, str, str], TimingRow] = {}
    for path, doc in docs:
        for row in doc["rows"]:
            name = row["name"]
            torch_ms = row.get("torch_ms") if isinstance(row.get("torch_ms"), int | float) else None
            for digest, k in row["kernels"].items():
                ms = k.get("ms") if isinstance(k, dict) else None
                if (
                    not isinstance(k, dict)
                    or k.get("check") != "ok"
                    or not isinstance(ms, int | float)
                    or ms <= 0
                ):
                    report.not_ok += 1
                    continue
                if (name, digest) not in known:
                    report.not_states += 1
                    continue
                values[(name, digest, str(doc["device"]))] = TimingRow(
                    name,
                    digest,
                    str(doc["device"]),
                    float(ms),
                    torch_ms,
                    json.dumps(row.get("bench")),
                    str(doc.get("date", "")),
                    str(path),
                )
    if not values:
        raise TimingsError(
            f"{report.source}: none of the timed kernels is a state or naive kernel of {store.path} "
            f"({report.not_states} other kernels, {report.not_ok} not ok); export the states of this store first"
        )
    for name, _, _ in values:
        report.imported[name] = report.imported.get(name, 0) + 1
    put_timings(store, list(values.values()))
    if refresh:
        _refresh_skills(store, sorted(report.imported), report)
    return report


def _refresh_skills(store: Store, workloads: list[str], report: ImportReport) -> None:
    from klineage.skills import extract_skills, upsert
    from klineage.workload import load_workload

    for name in workloads:
        expert = lineage_rows.expert_path(store, name)
        folder = Path(expert).parent if expert else None
        if folder is None or not (folder / "workload.py").is_file():
            report.not_refreshed[name] = (
                f"workload folder {folder} not found here; run `klineage mine` on it again"
            )
            continue
        upsert(store, extract_skills(store, load_workload(folder)))
        report.refreshed.append(name)


def kernel_times(store: Store, workload: str) -> dict[str, KernelTime]:
    """The newest imported time of each state (and the naive kernel) of `workload`, by kernel hash;
    one device: the newest import's."""
    rows = timing_rows(store, workload)
    if not rows:
        return {}
    device = rows[0]["device"]
    out: dict[str, KernelTime] = {}
    for r in rows:
        if r["device"] == device and r["kernel_hash"] not in out:
            out[r["kernel_hash"]] = KernelTime(r["kernel_hash"], device, r["median_ms"], r["torch_ms"])
    return out
