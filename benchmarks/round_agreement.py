"""Do a CPU round's figures agree with the GPU loop's? (issue 26: "the loop-on-the-GPU figures
agree with the CPU-round figures within the timing spread").

The two ways of running the materializer on a corpus end in a best kernel per (workload, mode):
the loop on the GPU (`materialize_bench.py --backend cuda`) judges every candidate by its own
cuda gate; the CPU round (`--backend emu --measured J`) judges by the times a GPU judge process
`J` (`klineage timings bench`) measured for the candidates of an earlier emu round. This script
sets them side by side through the judge's own times, which measured both best kernels in one
process (the loop's bests passed to that judge as `--run loop_MODE=.../{name}/best.cu` columns; a
column named MODE alone is read too):

- the same kernel text: agree;
- two kernels whose judge times differ by no more than the larger of their two spreads: agree, the
  materializer's own GPU rule (materialize/judge.py) could not tell them apart;
- otherwise the row says which is faster and by how much; a CPU best the judge never timed
  (a kernel the measured round made after the judge ran) is `unmeasured`.

The per-mode geometric means of x naive and x torch are given both ways: the loop's own figures
(its trace) and the CPU round's (the judge's times).

    python benchmarks/round_agreement.py --loop GPU/bench.json --cpu CPU_OUT --judge J/materialized_bench.json
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from klineage.materialize.judge import gain_and_spread  # noqa: E402
from klineage.materialize.measured import MeasuredTimes, read_measured  # noqa: E402
from klineage.source.digest import source_hash  # noqa: E402
from klineage.timing_bench.tables import geomean  # noqa: E402
from klineage.timings import TimingsError, read_bench  # noqa: E402


@dataclass(frozen=True)
class Agreement:
    """One (workload, mode): the two bests and what the judge measured of them."""

    workload: str
    mode: str
    loop_x: float | None  # x naive, the loop's own times
    cpu_x: float | None  # x naive, the CPU round's (measured) times
    loop_ms: float | None  # the judge's time of the loop's best
    cpu_ms: float | None  # the judge's time of the CPU round's best
    spread_ms: float | None  # the larger spread of the two judge times (materialize/judge.py)
    verdict: str  # same kernel | within spread | loop faster | cpu faster | unmeasured


def compare(
    loop_rows: list[dict[str, Any]],
    cpu_rows: list[dict[str, Any]],
    cpu_dir: Path,
    judge_rows: list[dict[str, Any]],
    measured: MeasuredTimes,
) -> list[Agreement]:
    """One `Agreement` per (workload, mode) present in both runs (seed 0 of a random mode):
    `judge_rows` name the loop's best of each mode by its run column's digest, `measured` holds the
    judge's times (`read_measured` of the same file)."""
    judged = {r["name"]: r for r in judge_rows}
    cpu = {(r["workload"], r["mode"]): r for r in cpu_rows if r.get("seed", 0) == 0}
    out: list[Agreement] = []
    for lr in loop_rows:
        w, mode = lr["workload"], lr["mode"]
        if lr.get("seed", 0) != 0 or (w, mode) not in cpu or w not in judged:
            continue
        best = cpu_dir / w / mode / "best.cu"
        cpu_digest = source_hash(best.read_text()) if best.is_file() else None
        column = judged[w].get(f"loop_{mode}", judged[w].get(mode))
        loop_digest = column.get("digest") if isinstance(column, dict) else None
        cpu_t, loop_t = (measured.times.get((w, d)) if d else None for d in (cpu_digest, loop_digest))
        spread = None
        if loop_t is None or cpu_t is None:
            verdict = "unmeasured"
        else:
            gain, spread = gain_and_spread(cpu_t, loop_t)  # > 0: the loop's best is faster
            if loop_digest == cpu_digest:
                verdict = "same kernel"
            elif abs(gain) <= spread:
                verdict = "within spread"
            else:
                verdict = "loop faster" if gain > 0 else "cpu faster"
        out.append(
            Agreement(
                w,
                mode,
                lr.get("speedup"),
                cpu[(w, mode)].get("speedup"),
                loop_t.median_ms if loop_t else None,
                cpu_t.median_ms if cpu_t else None,
                spread,
                verdict,
            )
        )
    return out


def _fmt(x: float | None, spec: str) -> str:
    return "-" if x is None else format(x, spec)


def _means(src: list[dict[str, Any]], keys: set[tuple[str, str]]) -> str:
    """Geomean x naive / x torch of the seed-0 runs of `keys` in `src`."""
    sel = [r for r in src if (r["workload"], r["mode"]) in keys and r.get("seed", 0) == 0]
    xn = geomean([r.get("speedup") for r in sel])
    xt = geomean([r.get("speedup_vs_torch") for r in sel])
    return f"{_fmt(xn, '.3f')} / {_fmt(xt, '.3f')}"


def table(rows: list[Agreement], loop_rows: list[dict[str, Any]], cpu_rows: list[dict[str, Any]]) -> str:
    """The per-row table, then per mode the geomeans both ways and how many rows agree."""
    lines = [
        "| workload | mode | loop x naive | cpu x naive | judge ms (loop best) | judge ms (cpu best) | spread ms | verdict |",
        "|---|---|---:|---:|---:|---:|---:|---|",
    ]
    lines += [
        f"| {a.workload} | {a.mode} | {_fmt(a.loop_x, '.2f')} | {_fmt(a.cpu_x, '.2f')} | {_fmt(a.loop_ms, '.4f')} "
        f"| {_fmt(a.cpu_ms, '.4f')} | {_fmt(a.spread_ms, '.4f')} | {a.verdict} |"
        for a in rows
    ]
    lines += ["", "| mode | rows agreeing | loop geomean x naive / x torch | cpu geomean x naive / x torch |"]
    lines.append("|---|---:|---|---|")
    for mode in dict.fromkeys(a.mode for a in rows):
        mine = [a for a in rows if a.mode == mode]
        keys = {(a.workload, a.mode) for a in mine}
        agree = sum(a.verdict in ("same kernel", "within spread") for a in mine)
        lines.append(
            f"| {mode} | {agree}/{len(mine)} | {_means(loop_rows, keys)} | {_means(cpu_rows, keys)} |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument(
        "--loop", type=Path, required=True, help="the GPU loop's bench.json (materialize_bench.py)"
    )
    ap.add_argument("--cpu", type=Path, required=True, help="the CPU round's --out folder (its bench.json)")
    ap.add_argument("--judge", type=Path, required=True, help="the judge's materialized_bench.json")
    args = ap.parse_args(argv)
    try:
        loop_rows = json.loads(args.loop.read_text())
        cpu_rows = json.loads((args.cpu / "bench.json").read_text())
        judge_rows = read_bench(args.judge)["rows"]
        measured = read_measured([args.judge])
    except (OSError, ValueError, TimingsError) as e:
        print(f"round_agreement: {e}", file=sys.stderr)
        return 2
    rows = compare(loop_rows, cpu_rows, args.cpu, judge_rows, measured)
    print(table(rows, loop_rows, cpu_rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
