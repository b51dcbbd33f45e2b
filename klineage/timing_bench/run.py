"""The order of `klineage timings bench`'s steps: select the kernels, list them (--dry-run) or
build, check and time them workload by workload (the partial JSON rewritten after each, so a cut
short device call keeps what was timed), then the tables and the JSON document."""

from __future__ import annotations

import json
import time
from typing import Any

from klineage.timing_bench import gpu, report
from klineage.timing_bench.options import JSON_NAME, LOG_NAME, PARTIAL_NAME, BenchOptions
from klineage.timing_bench.select import Selection, select_kernels


def run_bench(opts: BenchOptions) -> int:
    """0: every kernel of a run or a curve point checked ok (or not timed for the deadline);
    1: one failed its check; bad input or no GPU: BenchInputError."""
    t_start = time.perf_counter()
    sel = select_kernels(opts)
    if opts.out:
        opts.out.mkdir(parents=True, exist_ok=True)
    if opts.dry_run:
        for line in report.dry_run_lines(sel):
            print(line)
        return 0

    def past_deadline() -> bool:
        return opts.deadline_s is not None and time.perf_counter() - t_start > opts.deadline_s

    dev = gpu.open_device(opts.budget_s, past_deadline)
    sink = open(opts.out / LOG_NAME, "w") if opts.out else None  # noqa: SIM115
    try:
        rows = _timed_rows(sel, opts, dev, sink)
        lines, doc, failed = report.summarize(rows, sel, opts, dev.name, dev.torch_version)
        lines.append(f"\nwall {time.perf_counter() - t_start:.0f} s")
        gpu.log("\n".join(lines), sink)
        if opts.out:
            (opts.out / JSON_NAME).write_text(json.dumps(doc, indent=1, default=str))
    finally:
        if sink:
            sink.close()
    return 1 if failed else 0


def _timed_rows(sel: Selection, opts: BenchOptions, dev: gpu.Device, sink: Any) -> list[dict[str, Any]]:
    built = gpu.build_sources(sel.sources, len(sel.names), sink)
    gpu.log(f"device {dev.name}; torch {dev.torch_version}", sink)
    rows: list[dict[str, Any]] = []
    for n in sel.names:
        t_n = time.perf_counter()
        row = gpu.time_workload(n, sel.dirs[n], built, dev, sink)
        rows.append(row)
        report.add_run_columns(row, sel)
        gpu.log(report.workload_line(row, sel.labels(), time.perf_counter() - t_n), sink)
        if opts.out:  # what was timed survives a run cut short
            (opts.out / PARTIAL_NAME).write_text(json.dumps(rows, indent=1, default=str))
    return rows
