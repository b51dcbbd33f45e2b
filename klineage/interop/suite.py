"""Whole suites in one command: every problem of a KernelBench level folder, every definition of
a FlashInfer-Trace dataset, each imported into a folder of its own or refused with its reason,
and a table of the outcome (imported / refused / reference runs on the derived shapes)."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from klineage.errors import KLineageError
from klineage.interop.kernelbench import Scale


@dataclass(frozen=True)
class SuiteRow:
    """One problem or definition: imported or not, why not, and whether its reference ran."""

    name: str
    imported: bool
    reason: str
    reference_ok: bool
    seconds: float
    #: torch itself passes the gate's comparison on the drawn inputs (None: no vendor to run)
    passable: bool | None = None
    note: str = ""


def _one(name: str, fn: Callable[[], object]) -> SuiteRow:
    from klineage.interop.checks import vendor_problems
    from klineage.workload import Workload

    t0 = time.monotonic()
    try:
        wl = fn()
    except KLineageError as e:
        reason = str(e).split(": ", 1)[-1] if str(e).startswith("/") else str(e)
        return SuiteRow(name, False, reason, False, time.monotonic() - t0)
    except Exception as e:  # a problem file that breaks our importer is a refusal of that file only
        return SuiteRow(
            name,
            False,
            f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}",
            False,
            time.monotonic() - t0,
        )
    passable: bool | None = None
    note = ""
    if isinstance(wl, Workload) and wl.vendor is not None:
        try:
            missed = vendor_problems(wl)
        except Exception as e:  # the vendor is the problem's own forward: report, never stop the suite
            missed = [f"{type(e).__name__}: {e}"]
        passable, note = not missed, "; ".join(missed)[:300]
    return SuiteRow(name, True, "", True, time.monotonic() - t0, passable, note)


def _number(p: Path) -> tuple[int, str]:
    head = p.stem.split("_", 1)[0]
    return (int(head) if head.isdigit() else 1 << 30, p.stem)


def import_kernelbench_suite(
    level_dir: Path,
    out_dir: Path,
    strict: bool = False,
    scale: Scale = Scale(),
    progress: Callable[[SuiteRow], None] | None = None,
) -> list[SuiteRow]:
    """Every `*.py` problem of a KernelBench level folder into out_dir/<problem stem>/."""
    from klineage.interop.kernelbench import import_problem

    if not level_dir.is_dir():
        raise KLineageError(f"{level_dir}: not a directory")
    rows = []
    for problem in sorted(level_dir.glob("*.py"), key=_number):
        row = _one(
            problem.stem,
            lambda problem=problem: import_problem(
                problem, out_dir / problem.stem, strict=strict, scale=scale
            ),
        )
        rows.append(row)
        if progress:
            progress(row)
    return rows


def import_flashinfer_suite(
    dataset: Path, out_dir: Path, progress: Callable[[SuiteRow], None] | None = None
) -> list[SuiteRow]:
    """Every definition of a FlashInfer-Trace dataset (definitions/[op/]NAME.json, its workloads
    at workloads/[op/]NAME.jsonl when present) into out_dir/<NAME>/; the reference is run on the
    inputs the gate draws for every emu shape."""
    from klineage.interop.flashinfer import import_definition

    defs = dataset / "definitions"
    if not defs.is_dir():
        raise KLineageError(f"{dataset}: no definitions/ folder (not a FlashInfer-Trace dataset)")
    rows = []
    for d in sorted(defs.rglob("*.json")):
        rel = d.relative_to(defs).with_suffix(".jsonl")
        jsonl = next(
            (p for p in (dataset / "workloads" / rel, dataset / "traces" / "workloads" / rel) if p.exists()),
            None,
        )

        def run(d: Path = d, jsonl: Path | None = jsonl) -> object:
            return import_definition(d, out_dir / d.stem, jsonl)  # it runs the reference before writing

        row = _one(d.stem, run)
        rows.append(row)
        if progress:
            progress(row)
    return rows


def print_table(rows: list[SuiteRow], title: str, console: Console) -> None:
    table = Table(title=title)
    for col in (
        "problem",
        "imported",
        "reference on derived shapes",
        "torch passes the gate",
        "reason refused / note",
        "s",
    ):
        table.add_column(col)
    for r in rows:
        table.add_row(
            escape(r.name),
            "yes" if r.imported else "no",
            "ok" if r.reference_ok else "-",
            {True: "yes", False: "NO", None: "-"}[r.passable],
            escape((r.reason or r.note)[:160]),
            f"{r.seconds:.1f}",
        )
    console.print(table)
    n = len(rows)
    ok = sum(r.imported for r in rows)
    console.print(
        f"{ok} of {n} imported ({100 * ok / max(n, 1):.0f}%), {sum(r.reference_ok for r in rows)} with the "
        f"reference running on the derived shapes; {n - ok} refused; torch itself passes the gate's comparison "
        f"on {sum(r.passable is True for r in rows)}, misses it on {sum(r.passable is False for r in rows)}",
        highlight=False,
    )
