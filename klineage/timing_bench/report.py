"""What `klineage timings bench` prints and writes from its timed rows: each row's run columns
(naive, each --run / --kernel label with its speedups), the per-workload log line, the --dry-run
listing, and at the end the tables and the JSON document (`klineage timings import` and the
materializer's `--measured` read it)."""

from __future__ import annotations

import time
from typing import Any

from klineage.timing_bench.options import NOT_TIMED, BenchOptions
from klineage.timing_bench.select import Selection
from klineage.timing_bench.tables import curve_tables, groups_of, run_table, speedups, timed_by_digest


def dry_run_lines(sel: Selection) -> list[str]:
    """Per workload its number of distinct kernels and each column's digest, then the total."""
    lines = []
    for n in sel.names:
        per_run = {lb: sel.digest.get((n, lb), "-") for lb in ["naive", *sel.labels()]}
        lines.append(f"{n} {len({h for (m, h) in sel.sources if m == n})} {per_run}")
    lines.append(f"{len(sel.sources)} distinct kernels over {len(sel.names)} workloads")
    return lines


def add_run_columns(row: dict[str, Any], sel: Selection) -> None:
    """row[label] for naive and each run: its kernel's check and time (or 'no kernel'), and the
    runs' speedups over naive and torch."""
    n = row["name"]
    for label in ["naive", *sel.labels()]:
        h = sel.digest.get((n, label))
        row[label] = dict(row["kernels"].get(h, {}), digest=h) if h else {"check": "no kernel"}
    naive_ms = row["naive"].get("ms")
    for label in sel.labels():
        ms = row[label].get("ms")
        row[label]["x_naive"] = naive_ms / ms if ms and naive_ms else None
        row[label]["x_torch"] = row.get("torch_ms") / ms if ms and row.get("torch_ms") else None
        row[label]["same_as_naive"] = row[label].get("digest") == row["naive"].get("digest")


def workload_line(row: dict[str, Any], labels: list[str], seconds: float) -> str:
    """The log line of one timed workload."""
    bad = sum(1 for k in row["kernels"].values() if k.get("check") != "ok")
    return (
        f"{row['name']}: naive {row['naive'].get('ms') or 0:.4f} ms, torch {row.get('torch_ms') or 0:.4f} ms; "
        f"{len(row['kernels'])} distinct kernels ({bad} not ok) in {seconds:.1f} s"
        + "".join(f", {lb} {row[lb].get('ms') or 0:.4f} ms ({row[lb].get('check')})" for lb in labels)
    )


def summarize(
    rows: list[dict[str, Any]], sel: Selection, opts: BenchOptions, device: str, torch_version: str
) -> tuple[list[str], dict[str, Any], list[tuple[str, str]]]:
    """(the closing lines, the JSON document, the (workload, column) kernels that failed)."""
    stamp = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    labels = sel.labels()
    lines = [
        f"{stamp}; {device}; torch {torch_version}; suite {opts.suite}; budget {opts.budget_s} s per kernel"
    ]
    if labels:
        lines += run_table(rows, labels, groups_of(opts.suite, sel.names))
    doc: dict[str, Any] = {
        "date": stamp,
        "device": device,
        "torch": torch_version,
        "suite": opts.suite,
        "runs": dict(sel.runs),
        "rows": rows,
    }
    failed = [
        (r["name"], lb)
        for r in rows
        for lb in labels
        if r[lb].get("check") not in ("ok", "no kernel", NOT_TIMED)
    ]
    if sel.curve is not None:
        text, doc["curve"], curve_failed = _curve_part(rows, sel, opts)
        lines += ["", text]
        failed += curve_failed
    if failed:
        lines.append(f"\nnot ok: {', '.join(f'{n} {col}' for n, col in failed)}")
    late = [(r["name"], h) for r in rows for h, k in r["kernels"].items() if k.get("check") == NOT_TIMED]
    if late:
        lines.append(
            f"\n{len(late)} kernels not timed (--deadline-s {opts.deadline_s:g} passed): "
            + ", ".join(sorted({n for n, _ in late}))
        )
    return lines, doc, failed


def _curve_part(
    rows: list[dict[str, Any]], sel: Selection, opts: BenchOptions
) -> tuple[str, dict[str, Any], list[tuple[str, str]]]:
    """The budget curve's tables, its JSON part and its points whose kernel failed its check."""
    assert sel.curve is not None
    timed = timed_by_digest(rows)
    x = speedups(sel.names, sel.curve_cols, sel.digest, timed)
    text, summary = curve_tables(x, groups_of(opts.suite, sel.names), sel.curve["labels"], sel.curve["ks"])
    part = {
        "index": str(opts.curve),
        "labels": sel.curve["labels"],
        "ks": sel.curve["ks"],
        "summary": summary,
        "x_naive": {f"{n}|{col}": v for (n, col), v in x.items()},
    }
    failed = [
        (n, col)
        for n in sel.names
        for col in sel.curve_cols
        if (n, col) in sel.digest
        and timed.get((n, sel.digest[(n, col)]), {}).get("check") not in ("ok", NOT_TIMED)
    ]
    return text, part, failed
