"""Thin wrapper: `python3 benchmarks/materialized_bench.py OPTIONS` is `klineage timings bench
OPTIONS` (klineage/timing_bench/: kernels made anywhere, checked and timed on the GPU in one
process beside naive and torch; OUT/materialized_bench.json and .log). Kept so the commands in
benchmarks/RESULTS.md and older notes run as they did; `klineage timings bench --help` lists the
options.
"""

from __future__ import annotations

import sys


def main(argv: list[str] | None = None) -> int:
    from klineage.cli import run_command

    return run_command(["timings", "bench", *(sys.argv[1:] if argv is None else argv)], prog_name="klineage")


if __name__ == "__main__":
    sys.exit(main())
