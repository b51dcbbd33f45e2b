"""`klineage timings bench`: kernels made anywhere (the CPU emulator too), checked and timed on the
GPU in one process beside their naive kernel and the workload's vendor call (torch).

For every workload the naive kernel and the kernels of each materializer run (`--run
LABEL=PATTERN`), of a budget curve (`--curve`, materialize_bench.py's index) or of an index of
lineage states (`--extra`, `klineage timings export`) are built in parallel, checked with the
correctness protocol on the `test` shapes (two seeds) and timed at the bench shape with the
`cuda` gate's timing. Identical texts are timed once. The JSON it writes
(OUT/materialized_bench.json) is what `klineage timings import` and the materializer's
`--measured` read. `benchmarks/materialized_bench.py` is a thin wrapper over this command.

Modules, one job each: `options` (what was asked), `select` (which files, one per distinct
text), `gpu` (build, check, time), `tables` (speedups, geomeans, the tables), `report` (the
rows' run columns, the JSON document and the printed summary), `run` (the order of the steps).
"""

from __future__ import annotations

from klineage.timing_bench.options import BenchInputError, BenchOptions
from klineage.timing_bench.run import run_bench

__all__ = ["BenchInputError", "BenchOptions", "run_bench"]
