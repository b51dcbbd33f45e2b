"""Speedups, geometric means and the printed tables of `klineage timings bench`, from timed rows
(no GPU here: these are pure functions of the rows, tested on the CPU)."""

from __future__ import annotations

import math
from typing import Any

from klineage.corpus import COMPUTE_BOUND, MEMORY_BOUND


def geomean(xs: list[float | None]) -> float | None:
    ys = [x for x in xs if x and x > 0]
    return math.exp(sum(map(math.log, ys)) / len(ys)) if ys else None


def curve_column(label: str, k: int) -> str:
    """The column of one budget point among the kernels of a workload (next to naive and the --run labels)."""
    return f"{label}@{k}"


def speedups(
    names: list[str],
    columns: list[str],
    digest: dict[tuple[str, str], str],
    timed: dict[tuple[str, str], dict[str, Any]],
) -> dict[tuple[str, str], float | None]:
    """x naive per (name, column): naive's time over the column's, None where either is missing or not ok."""
    out: dict[tuple[str, str], float | None] = {}
    for n in names:
        naive = timed.get((n, digest.get((n, "naive"), "")), {})
        for col in columns:
            k = timed.get((n, digest.get((n, col), "")), {})
            ok = naive.get("check") == "ok" and k.get("check") == "ok" and naive.get("ms") and k.get("ms")
            out[(n, col)] = naive["ms"] / k["ms"] if ok else None
    return out


def curve_summary(
    x: dict[tuple[str, str], float | None], names: list[str], labels: list[dict[str, Any]], ks: list[int]
) -> list[dict[str, Any]]:
    """Per k: per mode, the geomean over `names` of x naive (random: per seed, then the geomean,
    min and max of the seeds' geomeans) and `n`, how many (workload, seed) pairs had a timed kernel."""
    out = []
    for k in ks:
        point: dict[str, Any] = {"k": k}
        for mode in dict.fromkeys(lb["mode"] for lb in labels):
            per_label = []
            for lb in (lb for lb in labels if lb["mode"] == mode):
                xs = [x.get((n, curve_column(lb["label"], k))) for n in names]
                per_label.append({"label": lb["label"], "geomean": geomean(xs), "n": sum(1 for v in xs if v)})
            gs = [p["geomean"] for p in per_label if p["geomean"]]
            point[mode] = {
                "geomean": geomean(gs),
                "min": min(gs) if gs else None,
                "max": max(gs) if gs else None,
                "n": sum(p["n"] for p in per_label),
                "labels": per_label,
            }
        out.append(point)
    return out


def curve_area(rows: list[dict[str, Any]], mode: str) -> dict[str, float | None]:
    """The area under a mode's budget curve, as a geometric mean over k = 1..B of its geomean x
    naive (a run that gets there sooner scores higher; the budget's last point alone does not
    tell that): for a mode of several seeds, each seed's area, then their geomean, min and max.
    None where a point had no timed kernel, so a partial curve is never compared."""
    labels = [lb["label"] for lb in rows[0][mode]["labels"]] if rows else []
    per = []
    for i in range(len(labels)):
        gs = [r[mode]["labels"][i]["geomean"] for r in rows]
        per.append(geomean(gs) if all(gs) else None)
    ok = [a for a in per if a]
    full = len(ok) == len(per) and bool(per)
    return {
        "area": geomean(ok) if full else None,
        "min": min(ok) if full else None,
        "max": max(ok) if full else None,
    }


def curve_tables(
    x: dict[tuple[str, str], float | None],
    groups: dict[str, list[str]],
    labels: list[dict[str, Any]],
    ks: list[int],
) -> tuple[str, dict[str, Any]]:
    """Markdown: one budget table per group of workloads, then x naive per (workload, label) and k."""
    modes = list(dict.fromkeys(lb["mode"] for lb in labels))
    seeds = {m: sum(1 for lb in labels if lb["mode"] == m) for m in modes}

    def cell(v: float | None, n: int, of: int) -> str:
        return ("-" if v is None else f"{v:.2f}") + ("" if n == of else f" ({n}/{of})")

    lines: list[str] = []
    summary: dict[str, Any] = {}
    for group, members in groups.items():
        if not members:
            continue
        rows = curve_summary(x, members, labels, ks)
        summary[group] = rows
        head = ["k"]
        for m in modes:
            head += [f"{m} (geomean of {seeds[m]} seeds)", f"{m} min", f"{m} max"] if seeds[m] > 1 else [m]
        lines += [
            f"{group} ({len(members)}: {', '.join(members)}): geomean x naive after k gated candidates",
            "",
            "| " + " | ".join(head) + " |",
            "|" + "---:|" * len(head),
        ]
        for r in rows:
            cells = [str(r["k"])]
            for m in modes:
                d, of = r[m], len(members) * seeds[m]
                cells.append(cell(d["geomean"], d["n"], of))
                if seeds[m] > 1:
                    cells += [cell(d["min"], d["n"], of), cell(d["max"], d["n"], of)]
            lines.append("| " + " | ".join(cells) + " |")
        cells = ["area"]
        for m in modes:
            a = curve_area(rows, m)
            summary.setdefault("area", {}).setdefault(group, {})[m] = a
            cells.append("-" if a["area"] is None else f"{a['area']:.2f}")
            if seeds[m] > 1:
                cells += ["-" if a[b] is None else f"{a[b]:.2f}" for b in ("min", "max")]
        lines.append("| " + " | ".join(cells) + " |")
        lines += [
            "",
            "area: the geometric mean of the row's values over k (the area under the log curve)",
            "",
        ]
    names = [n for members in groups.values() for n in members]
    names = list(dict.fromkeys(names))
    lines += [
        "x naive per workload and label after k gated candidates",
        "",
        "| workload | label | " + " | ".join(f"k={k}" for k in ks) + " |",
        "|---|---|" + "---:|" * len(ks),
    ]
    for n in names:
        for lb in labels:
            vals = [x.get((n, curve_column(lb["label"], k))) for k in ks]
            lines.append(
                f"| {n} | {lb['label']} | " + " | ".join(f"{v:.2f}" if v else "-" for v in vals) + " |"
            )
    return "\n".join(lines), summary


def groups_of(suite: str, names: list[str]) -> dict[str, list[str]]:
    """The corpus apart by family (memory-bound, compute-bound, anything else); held-out: one group."""
    if suite != "corpus":
        return {"all": names}
    return {
        "memory-bound": [n for n in names if n in MEMORY_BOUND],
        "compute-bound": [n for n in names if n in COMPUTE_BOUND],
        "other": [n for n in names if n not in MEMORY_BOUND and n not in COMPUTE_BOUND],
    }


def timed_by_digest(rows: list[dict[str, Any]]) -> dict[tuple[str, str], dict[str, Any]]:
    """{(name, digest): the kernel's check and time} from the rows."""
    return {(r["name"], h): k for r in rows for h, k in r["kernels"].items()}


def run_table(rows: list[dict[str, Any]], labels: list[str], groups: dict[str, list[str]]) -> list[str]:
    """The --run table: per workload, naive, torch and each run's time and speedups; then per run
    and group of workloads the geometric means."""
    lines = [
        "| workload | bench shape | naive ms | torch ms | "
        + " | ".join(f"{lb} ms | x naive | x torch" for lb in labels)
        + " |",
        "|---|---|---|---|" + "---|---|---|" * len(labels),
    ]
    for r in rows:
        shape = "x".join(str(v) for v in (r.get("bench") or {}).values())
        cells = [r["name"], shape, f"{r['naive'].get('ms') or 0:.4f}", f"{r.get('torch_ms') or 0:.4f}"]
        for lb in labels:
            k = r[lb]
            ok = k.get("check") == "ok"
            cells += [
                f"{k['ms']:.4f}" if ok else k.get("check", "")[:40],
                f"{k['x_naive']:.2f}" if ok and k.get("x_naive") else "-",
                f"{k['x_torch']:.2f}" if ok and k.get("x_torch") else "-",
            ]
        lines.append("| " + " | ".join(cells) + " |")
    lines.append("")
    for group, members in groups.items():
        rs = [r for r in rows if r["name"] in members]
        if not rs:
            continue
        for lb in labels:
            xs = [r[lb].get("x_naive") for r in rs if r[lb].get("check") == "ok"]
            ts = [r[lb].get("x_torch") for r in rs if r[lb].get("check") == "ok"]
            bad = [r["name"] for r in rs if r[lb].get("check") not in ("ok", "no kernel")]
            g, gt = geomean(xs), geomean(ts)
            lines.append(
                f"{group} ({len(rs)}), {lb}: {len(xs)} kernels checked ok, geomean x naive {g or 0:.2f}, "
                f"x torch {gt or 0:.2f}; {sum(1 for x in xs if x and x > 1.1)} over 1.1x naive; "
                f"failed: {', '.join(bad) or 'none'}"
            )
    return lines
