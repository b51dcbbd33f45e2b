"""Show on the GPU that the `cuda` gate rejects the known ways to fool a kernel timer and accepts
and times honest kernels against torch.

    bash benchmarks/gpu_setup.sh                                  # here, once (wheels)
    source benchmarks/gpu_env.sh && python3 benchmarks/gpu_gate_check.py --out "$OUT"   # there

Adversarial kernels and the tiny softmax workload: benchmarks/kernels/gpu_check/. Example
workloads: every .cu file of examples/NAME/ and expert_kernels/NAME/. Full results (JSON), tool logs
and the table go under --out; the short table is printed last.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
import time
import traceback
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
CHECK = ROOT / "benchmarks" / "kernels" / "gpu_check"


@dataclass
class Case:
    label: str
    kernel: Path
    workload: Path
    expect: tuple[str, ...]
    options: dict[str, Any] = field(default_factory=dict)
    extra: dict[str, Any] = field(default_factory=dict)
    keep: tuple[str, ...] = ()  # artifact files to copy under --out
    timed: bool = False  # its timing is reported: run alone, after the rejection rows


def adversarial_cases() -> list[Case]:
    k = CHECK
    return [
        Case(
            "honest softmax (ncu, energy)",
            k / "honest.cu",
            k,
            ("ok",),
            {"ncu": True, "energy": True},
            keep=("ncu_output.txt",),
            timed=True,
        ),
        Case(
            "pointer-keyed output cache",
            k / "pointer_cache.cu",
            k,
            ("mismatch", "nondeterministic", "unwritten_output"),
        ),
        Case("side-stream launch", k / "side_stream.cu", k, ("side_stream",)),
        Case("stale outputs (no tail)", k / "stale_tail.cu", k, ("unwritten_output",)),
        Case(
            "racy shared-memory sum (sanitize)",
            k / "racy.cu",
            k,
            ("nondeterministic", "mismatch"),
            {"sanitize": True, "timeout_s": 300.0},
        ),
        Case(
            "impossible speedup (side stream, CUPTI check off)",
            k / "side_stream.cu",
            k,
            ("suspicious",),
            extra={"skip_side_stream": True},
        ),
        Case(
            "out-of-bounds read (sanitize)",
            k / "oob.cu",
            k,
            ("out_of_bounds",),
            {"sanitize": True, "timeout_s": 300.0},
        ),
        Case("illegal address", k / "crash.cu", k, ("crash",)),
    ]


def example_cases(names: list[str] | None) -> list[Case]:
    """Every kernel file of every example workload (examples/NAME/, expert_kernels/NAME/)."""
    out = []
    for base in ("examples", "expert_kernels"):
        for wdir in sorted((ROOT / base).glob("*/")):
            if not (wdir / "workload.py").exists() or (names and wdir.name not in names):
                continue
            for src in sorted(wdir.glob("*.cu")):
                out.append(Case(f"example {base}/{wdir.name}/{src.stem}", src, wdir, ("ok",), timed=True))
    return out


def run_case(case: Case, art: Path) -> dict[str, Any]:
    from klineage.gates.backend import GateOptions
    from klineage.gates.gate import gate

    art.mkdir(parents=True, exist_ok=True)
    opts = {"backend": "cuda", "timeout_s": 180.0, **case.options}
    options = GateOptions(**opts, extra={"artifacts_dir": str(art), **case.extra})
    t0 = time.perf_counter()
    try:
        r = gate(case.kernel, case.workload, options, use_cache=False)
        res = r.to_dict()
    except Exception as e:  # noqa: BLE001 - one broken row must not hide the others
        res = {
            "accepted": False,
            "category": "harness_error",
            "message": f"{type(e).__name__}: {e}",
            "traceback": traceback.format_exc(),
        }
    res["wall_s"] = round(time.perf_counter() - t0, 2)
    res["artifacts"] = str(art)
    return res


def fmt_ms(t: dict[str, Any] | None, key: str = "median_ms", lo: str = "min_ms", hi: str = "max_ms") -> str:
    if not t or t.get(key) is None:
        return "-"
    return f"{t[key]:.4f} [{t[lo]:.4f}-{t[hi]:.4f}]"


def row_of(case: Case, res: dict[str, Any]) -> list[str]:
    t = res.get("timing") or {}
    cat = res.get("category", "?")
    verdict = "SKIP" if cat in ("skipped", "pending") else ("PASS" if cat in case.expect else "FAIL")
    speed = (t.get("extra") or {}).get("speedup_vs_torch")
    msg = " ".join(str(res.get("message", "")).split())
    return [
        case.label,
        case.kernel.name,
        "|".join(case.expect),
        cat,
        verdict,
        fmt_ms(t),
        fmt_ms(t, "reference_median_ms", "reference_min_ms", "reference_max_ms"),
        f"{speed:.2f}x" if speed else "-",
        f"{t['bandwidth_fraction']:.2f}" if t.get("bandwidth_fraction") is not None else "-",
        f"{t['cupti_kernel_ms']:.4f}" if t.get("cupti_kernel_ms") is not None else "-",
        msg[:150],
    ]


HEADER = [
    "case",
    "kernel",
    "expected",
    "got",
    "check",
    "ms median [min-max]",
    "torch ms median [min-max]",
    "vs torch",
    "BW frac",
    "CUPTI ms",
    "message",
]


def table(rows: list[list[str]]) -> str:
    lines = ["| " + " | ".join(HEADER) + " |", "|" + "---|" * len(HEADER)]
    lines += [
        "| "
        + " | ".join(c.replace("|", "/") if i != 2 else c.replace("|", " or ") for i, c in enumerate(r))
        + " |"
        for r in rows
    ]
    return "\n".join(lines)


def device_line() -> str:
    try:
        import torch

        from klineage.gates.cuda.sol import driver_version

        return f"{torch.cuda.get_device_name(0)}, driver {driver_version()}, torch {torch.__version__}"
    except Exception as e:  # noqa: BLE001
        return f"unknown device ({e})"


def measure_ceilings() -> str:
    """Measure the speed-of-light ceilings once, on a quiet GPU, before any row runs: the gate's
    child processes read them from the disk cache instead of measuring under load."""
    try:
        import torch

        from klineage.gates.cuda import sol

        c = sol.ceilings()
        torch.cuda.empty_cache()
        rates = ", ".join(f"{k} {v / 1e12:.0f} TFLOP/s" for k, v in c.matmul_flops_per_s.items())
        return f"ceilings: copy {c.copy_bytes_per_s / 1e12:.2f} TB/s (read+write), {rates} (measured {c.measured_at})"
    except Exception as e:  # noqa: BLE001
        return f"ceilings: not measured ({type(e).__name__}: {e})"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", default="out/gpu_gate_check", help="folder for logs and results")
    p.add_argument("--only", default="", help="comma-separated substrings of case labels to run")
    p.add_argument("--examples", default="", help="comma-separated expert_kernels names (default: all)")
    p.add_argument("--no-examples", action="store_true")
    p.add_argument("--jobs", type=int, default=4, help="rejection rows run side by side")
    p.add_argument(
        "--deadline-s",
        type=float,
        default=0.0,
        help="skip the timed rows not started within this many seconds (0: no limit)",
    )
    ns = p.parse_args(argv)
    out = Path(ns.out)
    out.mkdir(parents=True, exist_ok=True)
    cases = adversarial_cases()
    if not ns.no_examples:
        cases += example_cases([n for n in ns.examples.split(",") if n] or None)
    if ns.only:
        keys = [k.strip() for k in ns.only.split(",") if k.strip()]
        cases = [c for c in cases if any(k in c.label for k in keys)]
    ceilings = measure_ceilings()
    print(ceilings, flush=True)
    art_root = Path(tempfile.mkdtemp(prefix="gpu_gate_check_"))
    started = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime())
    header = (
        f"gpu_gate_check: {started}, {device_line()}\n{ceilings}\n"
        f"command: source benchmarks/gpu_env.sh && python3 benchmarks/gpu_gate_check.py {' '.join(argv or sys.argv[1:])}"
    )
    done: dict[int, dict[str, Any]] = {}

    def write() -> str:
        """Results so far, rewritten after every row: a run cut short keeps what it measured."""
        results, rows = [], []
        for i, case in enumerate(cases):
            res = done.get(i, {"category": "pending", "message": ""})
            results.append(
                {
                    "case": case.label,
                    "kernel": str(case.kernel.relative_to(ROOT)),
                    "expect": case.expect,
                    **res,
                }
            )
            rows.append(row_of(case, res))
        (out / "gate_check.json").write_text(
            json.dumps({"header": header, "results": results}, indent=1, default=str)
        )
        text = header + "\n\n" + table(rows) + "\n"
        (out / "gate_check_table.md").write_text(text)
        return text

    def finish(i: int, res: dict[str, Any]) -> None:
        case = cases[i]
        done[i] = res
        t = res.get("timing") or {}
        print(
            f"[{len(done)}/{len(cases)}] {case.label}: {res.get('category')} ({res.get('wall_s')} s) "
            f"ms {fmt_ms(t)} torch {fmt_ms(t, 'reference_median_ms', 'reference_min_ms', 'reference_max_ms')} "
            f"{str(res.get('message', ''))[:160]}",
            flush=True,
        )
        art = Path(res["artifacts"])
        for name in case.keep:
            if (art / name).exists():
                shutil.copy(art / name, out / name)
        write()

    # rejection rows need no quiet GPU: run them side by side; timed rows one at a time after
    untimed = [i for i, c in enumerate(cases) if not c.timed]
    with ThreadPoolExecutor(max_workers=max(1, ns.jobs)) as pool:
        futures = {pool.submit(run_case, cases[i], art_root / f"{i:02d}"): i for i in untimed}
        for f in as_completed(futures):
            finish(futures[f], f.result())
    t_start = time.monotonic()
    for i, c in enumerate(cases):
        if not c.timed:
            continue
        if ns.deadline_s and time.monotonic() - t_start > ns.deadline_s:
            done[i] = {
                "category": "skipped",
                "message": f"not run: past --deadline-s {ns.deadline_s:g}",
                "artifacts": str(art_root),
            }
            continue
        finish(i, run_case(c, art_root / f"{i:02d}"))
    text = write()
    rows = [row_of(c, done[i]) for i, c in enumerate(cases)]
    failed = sum(r[4] == "FAIL" for r in rows)
    skipped = sum(r[4] == "SKIP" for r in rows)
    print("\n" + text + f"\n{len(rows) - failed - skipped}/{len(rows)} rows as expected, {skipped} skipped")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
