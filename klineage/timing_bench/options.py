"""What `klineage timings bench` was asked to time, as one typed value (the CLI and the
benchmarks/materialized_bench.py wrapper both build it from the same options)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from klineage.errors import KLineageError
from klineage.paths import repo_root

#: the suites of this repository: held-out instances and the expert corpus
SUITES = {"heldout": "heldout", "corpus": "expert_kernels"}
#: a kernel's check when the deadline passed before it was timed
NOT_TIMED = "not timed (deadline)"
#: the files the command writes under --out (the names the pipeline and the importers expect)
LOG_NAME, JSON_NAME, PARTIAL_NAME = (
    "materialized_bench.log",
    "materialized_bench.json",
    "materialized_bench.partial.json",
)


class BenchInputError(KLineageError):
    """Bad options or index files, or no GPU: one line, exit 2."""


@dataclass(frozen=True)
class BenchOptions:
    """The command's options, with its defaults (see `klineage timings bench --help`)."""

    suite: str = "heldout"
    workloads: tuple[Path, ...] = ()
    kernels: tuple[str, ...] = ()
    only: str = ""
    runs: tuple[str, ...] = ()
    curve: Path | None = None
    extra: Path | None = None
    labels: str = ""
    ks: str = ""
    budget_s: float = 1.0
    out: Path | None = None
    dry_run: bool = False
    deadline_s: float | None = None

    def suite_dir(self) -> Path:
        if self.suite not in SUITES:
            raise BenchInputError(f"--suite {self.suite}: unknown (known: {', '.join(sorted(SUITES))})")
        return repo_root() / SUITES[self.suite]
