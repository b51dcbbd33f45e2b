"""bf16 GEMM kernels (the gemm_bf16 launcher) built under -D variants, checked against torch and
timed beside cuBLAS, each variant in its own process so that one that hangs or faults costs only
its own time limit (issue 25, item 3: the Hopper expert and its fallbacks in one device call).

    source benchmarks/gpu_env.sh && python3 benchmarks/gemm_variants_bench.py --out "$OUT/x" \\
        --variant wgmma=expert_kernels/gemm_bf16/variants/expert_wgmma.cu \\
        --variant wgmma_n128=expert_kernels/gemm_bf16/variants/expert_wgmma.cu:KL_WGMMA_N=128 \\
        --variant mma_sync=expert_kernels/gemm_bf16/expert.cu

A variant is NAME=FILE[:MACRO=VALUE,...]; the macros go to nvcc as -D flags. Every file is built
with the cuda gate's flags (-O3 -std=c++17, -gencode arch=compute_90a,code=sm_90a) into a shared library exporting `launch`.
Per variant, in a child process: every check shape on fresh inputs (randn bf16, C pre-filled with
NaN) against an fp32 reference (TF32 off): relative Frobenius error (the workload's metric,
<= 1e-2) and the largest absolute error; then every timing shape: the launch alone between CUDA
events, L2 flushed (a 256 MB write) before each repetition, median of the repetitions. cuBLAS
(torch.matmul, bf16) is timed the same way in a child of its own. Writes bench.json and prints
a table last.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from pathlib import Path

CHECK_SHAPES = (
    (64, 64, 64),
    (192, 320, 128),
    (640, 448, 576),
    (2112, 2240, 320),
    (128, 1024, 2048),
    (4096, 4096, 4096),
)
TIME_SHAPES = ((4096, 4096, 4096), (8192, 1024, 8192))
TOLERANCE = 1e-2  # gemm_bf16's relative Frobenius bound
CUBLAS = "cublas"


@dataclass(frozen=True)
class Variant:
    name: str
    source: Path
    defines: tuple[str, ...] = ()

    @staticmethod
    def parse(spec: str) -> Variant:
        name, _, rest = spec.partition("=")
        path, _, macros = rest.partition(":")
        return Variant(name, Path(path), tuple(m for m in macros.split(",") if m))


@dataclass
class Outcome:
    name: str
    status: str = "not run"  # build_error / ok / wrong / crash / timeout / not run
    message: str = ""
    source: str = ""
    defines: list[str] = field(default_factory=list)
    checks: list[dict] = field(default_factory=list)
    times_ms: dict[str, float] = field(default_factory=dict)


def nvcc_command(v: Variant, library: Path) -> list[str]:
    """The cuda gate's flags (gates/cuda/build.py) plus the variant's -D macros."""
    return [
        "nvcc",
        "-O3",
        "-std=c++17",
        "-gencode=arch=compute_90a,code=sm_90a",
        "-Xcompiler",
        "-fPIC",
        "-shared",
        "-lineinfo",
        *(f"-D{d}" for d in v.defines),
        "-o",
        str(library),
        str(v.source),
    ]


def build(v: Variant, out: Path) -> tuple[Path, str]:
    library = out / f"lib_{v.name}.so"
    proc = subprocess.run(nvcc_command(v, library), capture_output=True, text=True, timeout=300, check=False)
    (out / f"build_{v.name}.log").write_text(proc.stdout + proc.stderr)
    return library, "" if proc.returncode == 0 else (proc.stdout + proc.stderr).strip()[-400:]


def shape_key(s: tuple[int, int, int]) -> str:
    return "x".join(map(str, s))


# ---- the child: one variant (or cuBLAS) on the GPU ------------------------------------------------


def child(name: str, library: str, reps: int) -> dict:
    import ctypes

    import torch

    torch.backends.cuda.matmul.allow_tf32 = False
    dev = torch.device("cuda")
    stream = torch.cuda.current_stream()
    if name == CUBLAS:

        def run(a, b, c, m, n, k):  # noqa: ANN001, ANN202
            torch.matmul(a, b, out=c)
    else:
        lib = ctypes.CDLL(library)
        lib.launch.argtypes = [ctypes.c_void_p] * 3 + [ctypes.c_int] * 3 + [ctypes.c_void_p]
        lib.launch.restype = None

        def run(a, b, c, m, n, k):  # noqa: ANN001, ANN202
            lib.launch(a.data_ptr(), b.data_ptr(), c.data_ptr(), m, n, k, stream.cuda_stream)

    res: dict = {"checks": [], "times_ms": {}}
    gen = torch.Generator(device=dev).manual_seed(0)
    for m, n, k in CHECK_SHAPES if name != CUBLAS else ():
        a = torch.randn(m, k, device=dev, generator=gen).to(torch.bfloat16)
        b = torch.randn(k, n, device=dev, generator=gen).to(torch.bfloat16)
        c = torch.full((m, n), float("nan"), device=dev, dtype=torch.bfloat16)
        run(a, b, c, m, n, k)
        torch.cuda.synchronize()
        ref = a.float() @ b.float()
        diff = (c.float() - ref).nan_to_num(nan=float("inf"))
        rel = (diff.norm() / ref.norm()).item()
        res["checks"].append(
            {
                "shape": shape_key((m, n, k)),
                "rel_frobenius": rel,
                "max_abs": diff.abs().max().item(),
                "ok": bool(rel <= TOLERANCE),
            }
        )
        print(json.dumps(res["checks"][-1]), flush=True)
    flush = torch.empty(256 << 20, dtype=torch.uint8, device=dev)
    for m, n, k in TIME_SHAPES:
        a = torch.randn(m, k, device=dev, generator=gen).to(torch.bfloat16)
        b = torch.randn(k, n, device=dev, generator=gen).to(torch.bfloat16)
        c = torch.empty(m, n, device=dev, dtype=torch.bfloat16)
        for _ in range(3):
            run(a, b, c, m, n, k)
        ms = []
        for _ in range(reps):
            flush.zero_()
            e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            e0.record(stream)
            run(a, b, c, m, n, k)
            e1.record(stream)
            e1.synchronize()
            ms.append(e0.elapsed_time(e1))
        ms.sort()
        res["times_ms"][shape_key((m, n, k))] = ms[len(ms) // 2]
        print(json.dumps({"shape": shape_key((m, n, k)), "median_ms": ms[len(ms) // 2]}), flush=True)
    return res


def run_child(name: str, library: Path | None, reps: int, limit_s: float, log: Path) -> Outcome:
    cmd = [sys.executable, __file__, "--child", name, "--library", str(library or ""), "--reps", str(reps)]
    o = Outcome(name)
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=limit_s, check=False)
    except subprocess.TimeoutExpired as e:
        text = (e.stdout or b"").decode() if isinstance(e.stdout, bytes) else (e.stdout or "")
        log.write_text(text)
        o.status, o.message = "timeout", f"no result within {limit_s:.0f} s (a hang?)"
        return o
    log.write_text(proc.stdout + proc.stderr)
    last = proc.stdout.strip().splitlines()[-1:] if proc.stdout.strip() else []
    if proc.returncode != 0 or not last or not last[0].startswith("RESULT "):
        err = [ln for ln in proc.stderr.strip().splitlines() if ln.strip()]
        o.status, o.message = "crash", (err[-1] if err else f"exit {proc.returncode}")
        return o
    res = json.loads(last[0][len("RESULT ") :])
    o.checks, o.times_ms = res["checks"], res["times_ms"]
    o.status = "ok" if all(c["ok"] for c in o.checks) else "wrong"
    return o


def fastest_correct(outcomes: list[Outcome], prefix: str = "") -> Outcome | None:
    """The correct variant named `prefix...` with the least total time over the timed shapes."""
    ok = [o for o in outcomes if o.name.startswith(prefix) and o.status == "ok" and o.times_ms and o.source]
    return min(ok, key=lambda o: sum(o.times_ms.values()), default=None)


def table(outcomes: list[Outcome]) -> str:
    base = next((o.times_ms for o in outcomes if o.name == CUBLAS), {})
    lines = [
        "| variant | status | worst rel. Frobenius | "
        + " | ".join(f"{shape_key(s)} ms (x cuBLAS, TFLOP/s)" for s in TIME_SHAPES)
        + " |",
        "|---|---|---|" + "---|" * len(TIME_SHAPES),
    ]
    for o in outcomes:
        worst = max((c["rel_frobenius"] for c in o.checks), default=float("nan"))
        cells = []
        for s in TIME_SHAPES:
            t = o.times_ms.get(shape_key(s))
            if t is None:
                cells.append("")
                continue
            ratio = f"{base[shape_key(s)] / t:.2f}x" if shape_key(s) in base else "-"
            cells.append(f"{t:.4f} ({ratio}, {2 * s[0] * s[1] * s[2] / t / 1e9:.0f})")
        status = o.status if not o.message else f"{o.status}: {o.message[:60]}"
        lines.append(f"| {o.name} | {status} | {worst:.2e} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--variant", action="append", default=[], help="NAME=FILE[:MACRO=VALUE,...]")
    ap.add_argument("--out", type=Path, default=Path("/tmp/gemm_variants"))
    ap.add_argument("--reps", type=int, default=20)
    ap.add_argument(
        "--child-limit-s", type=float, default=30.0, help="seconds one variant's process may take"
    )
    ap.add_argument("--deadline-s", type=float, default=90.0, help="no variant starts after this")
    ap.add_argument("--gate-file", type=Path, help="write the fastest correct variant here (macros first)")
    ap.add_argument("--gate-prefix", default="", help="only variants whose name starts so are candidates")
    ap.add_argument("--child", help=argparse.SUPPRESS)
    ap.add_argument("--library", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        print("RESULT " + json.dumps(child(args.child, args.library, args.reps)), flush=True)
        return 0
    t0 = time.monotonic()
    args.out.mkdir(parents=True, exist_ok=True)
    variants = [Variant.parse(s) for s in args.variant]
    with ThreadPoolExecutor(max_workers=max(1, min(len(variants), os.cpu_count() or 1))) as pool:
        built = {
            v.name: r for v, r in zip(variants, pool.map(lambda v: build(v, args.out), variants), strict=True)
        }
    print(f"built {len(variants)} variants in {time.monotonic() - t0:.1f} s", flush=True)
    outcomes = [run_child(CUBLAS, None, args.reps, args.child_limit_s, args.out / "run_cublas.log")]
    for v in variants:
        library, error = built[v.name]
        if error:
            outcomes.append(Outcome(v.name, "build_error", error))
        elif time.monotonic() - t0 > args.deadline_s:
            outcomes.append(Outcome(v.name, "not run", "past the deadline"))
        else:
            outcomes.append(
                run_child(v.name, library, args.reps, args.child_limit_s, args.out / f"run_{v.name}.log")
            )
        outcomes[-1].source, outcomes[-1].defines = str(v.source), list(v.defines)
        print(f"{v.name}: {outcomes[-1].status} {outcomes[-1].message[:200]}", flush=True)
        save(outcomes, args)  # after every variant: a call cut short keeps what it measured
    best = fastest_correct(outcomes, prefix=args.gate_prefix)
    if best is not None:
        print(f"fastest correct {args.gate_prefix}* variant: {best.name} -> {args.gate_file}", flush=True)
    print(table(outcomes), flush=True)
    return 0


def save(outcomes: list[Outcome], args: argparse.Namespace) -> None:
    """bench.json, its table, and the fastest correct variant so far as one file (macros first)."""
    (args.out / "bench.json").write_text(json.dumps([asdict(o) for o in outcomes], indent=1))
    (args.out / "table.md").write_text(table(outcomes) + "\n")
    best = fastest_correct(outcomes, prefix=args.gate_prefix)
    if best is not None and args.gate_file is not None:
        defines = "".join(f"#define {d.replace('=', ' ', 1)}\n" for d in best.defines)
        args.gate_file.write_text(defines + Path(best.source).read_text())


if __name__ == "__main__":
    sys.exit(main())
