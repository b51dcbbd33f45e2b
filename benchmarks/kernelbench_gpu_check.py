"""KernelBench round trip on the GPU (issue 12): import a problem and its solution, gate the
wrapped solution with the `cuda` backend, export it back as a ModelNew file, and evaluate that
file the way KernelBench's evaluator does (seed, build Model and ModelNew from the same init
inputs, same random inputs, `torch.allclose` with atol = rtol = 1e-2 over several trials, then
CUDA-event timing of both forwards).

    source benchmarks/gpu_env.sh && python3 benchmarks/kernelbench_gpu_check.py --out "$OUT"

The agreement check over real solutions (`--pairs`, issue 29) is benchmarks/kernelbench_agreement.py.

KernelBench itself is not installed on the GPU machine (no registry there); the evaluation below
follows its protocol with plain torch. Each ModelNew is loaded in a child process of its own:
`load_inline` compiles and loads a shared library, which must not outlive one problem.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "tests" / "data" / "interop"
PROBLEMS = ("kb_add", "kb_rowsum", "kb_linear")
TRIALS = 5
TIMED = 100


def _median_ms(fn: Any, inputs: list[Any]) -> float:
    import torch

    for _ in range(10):
        fn(*inputs)
    times = []
    for _ in range(TIMED):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        fn(*inputs)
        b.record()
        b.synchronize()
        times.append(a.elapsed_time(b))
    return sorted(times)[len(times) // 2]


def evaluate(problem: Path, model_new: Path, timed: bool = True) -> dict[str, Any]:
    """KernelBench-style check of one ModelNew file (run in a child process)."""
    import torch

    from klineage.workload import import_user_file

    ref_mod, new_mod = (
        import_user_file(problem, "the problem file"),
        import_user_file(model_new, "ModelNew.py"),
    )
    out: dict[str, Any] = {"trials": TRIALS, "correct": 0, "max_abs_diff": 0.0}
    init = ref_mod.get_init_inputs()
    torch.manual_seed(42)
    ref = ref_mod.Model(*init).cuda()
    torch.manual_seed(42)
    new = new_mod.ModelNew(*init).cuda()
    for trial in range(TRIALS):
        torch.manual_seed(1000 + trial)
        inputs = [x.cuda() if isinstance(x, torch.Tensor) else x for x in ref_mod.get_inputs()]
        with torch.no_grad():
            want, got = ref(*inputs), new(*inputs)
        torch.cuda.synchronize()
        if want.shape == got.shape:
            out["max_abs_diff"] = max(out["max_abs_diff"], float((want - got).abs().max()))
            out["correct"] += int(torch.allclose(want, got, atol=1e-2, rtol=1e-2))
    if timed:
        with torch.no_grad():
            out["ref_ms"] = _median_ms(ref, inputs)
            out["new_ms"] = _median_ms(new, inputs)
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", default="")
    p.add_argument("--only", default="", help="comma-separated problems (default: all of PROBLEMS)")
    p.add_argument("--child", nargs=2, metavar=("PROBLEM", "MODELNEW"), help=argparse.SUPPRESS)
    p.add_argument("--untimed", action="store_true", help=argparse.SUPPRESS)
    p.add_argument(
        "--pairs",
        default="",
        help="the agreement check (issue 29): now benchmarks/kernelbench_agreement.py, which this runs",
    )
    args, rest = p.parse_known_args(argv)
    if args.child:
        print(json.dumps(evaluate(Path(args.child[0]), Path(args.child[1]), timed=not args.untimed)))
        return 0
    if rest and not args.pairs:
        p.error(f"unrecognized arguments: {' '.join(rest)}")
    if args.pairs:
        sys.path.insert(0, str(Path(__file__).parent))
        from kernelbench_agreement import main as agreement

        return agreement(["--pairs", args.pairs, "--out", args.out or tempfile.mkdtemp(), *rest])
    out = Path(args.out) if args.out else Path(tempfile.mkdtemp())
    out.mkdir(parents=True, exist_ok=True)
    kl = [sys.executable, "-m", "klineage"]
    rows, ok = [], True
    for name in args.only.split(",") if args.only else PROBLEMS:
        wl = out / name
        row: dict[str, Any] = {"problem": name}
        t0 = time.perf_counter()
        steps = [
            kl
            + [
                "import",
                "kernelbench",
                str(DATA / f"{name}_problem.py"),
                "--solution",
                str(DATA / f"{name}_solution.py"),
                "--out",
                str(wl),
            ],
            kl + ["gate", str(wl / "solution.cu"), "--workload", str(wl), "--backend", "cuda", "--json"],
            kl
            + [
                "export",
                "kernelbench",
                str(wl / "solution.cu"),
                "--workload",
                str(wl),
                "--out",
                str(wl / "ModelNew.py"),
            ],
            [sys.executable, __file__, "--child", str(wl / "problem.py"), str(wl / "ModelNew.py")],
        ]
        for label, cmd in zip(("import", "gate", "export", "evaluate"), steps, strict=True):
            r = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
            (out / f"{name}.{label}.log").write_text(f"$ {' '.join(cmd)}\n{r.stdout}\n{r.stderr}")
            if label == "gate":
                try:
                    g = json.loads(r.stdout)
                    g = g[0] if isinstance(g, list) else g
                    row["gate"] = g["category"]
                    row["gate_ms"] = (g.get("timing") or {}).get("median_ms")
                except (json.JSONDecodeError, KeyError, IndexError):
                    row["gate"] = f"rc {r.returncode}"
            if label == "evaluate" and r.returncode == 0:
                row.update(json.loads(r.stdout.strip().splitlines()[-1]))
            if r.returncode != 0:
                row["failed"] = (
                    f"{label}: rc {r.returncode}: {(r.stderr.strip().splitlines() or [''])[-1][:200]}"
                )
                ok = False
                break
        row["wall_s"] = round(time.perf_counter() - t0, 1)
        rows.append(row)
    (out / "kernelbench_gpu.json").write_text(json.dumps(rows, indent=2))
    print(
        "| problem | cuda gate | gate median ms | KernelBench-style correct | max abs diff | Model ms | ModelNew ms | wall s |"
    )
    print("| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: |")
    for r in rows:
        if "failed" in r:
            print(
                f"| {r['problem']} | {r.get('gate', '-')} | | failed: {r['failed']} | | | | {r['wall_s']} |"
            )
            continue
        gm = f"{r['gate_ms']:.4f}" if isinstance(r.get("gate_ms"), float) else "-"
        print(
            f"| {r['problem']} | {r['gate']} | {gm} | {r['correct']}/{r['trials']} | {r['max_abs_diff']:.2e} |"
            f" {r['ref_ms']:.4f} | {r['new_ms']:.4f} | {r['wall_s']} |"
        )
    return 0 if ok and all(r.get("correct") == r.get("trials") for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
