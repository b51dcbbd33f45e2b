"""Expert corpus on the GPU (memory-bound, issue 6; compute-bound, issue 10): correctness at the
test shapes, then expert, naive and torch timed at the bench shapes in one run.

    source benchmarks/gpu_env.sh && python3 benchmarks/corpus_bench.py --check --out "$OUT"

Per workload (expert_kernels/NAME/): builds expert.cu and naive.cu (nvcc, the `cuda` gate's
build: -O3 -std=c++17, sm_90a), optionally runs the correctness protocol (gates/protocol.py) on
every test shape with two seeds, then times each variant and the workload's vendor function
(torch) with the `cuda` gate's hardened timing (gates/cuda/timing.py: inputs refilled in place
and L2 flushed before every repetition, CUDA events around the launch alone, warm-up, 3 trials,
median of trial medians). After the expert's timed runs its outputs are checked once more on
fresh inputs at the bench shape. Bandwidth: the workload's fewest bytes moved (every input read
once, every output written once) over the median time, as a fraction of a device-to-device
copy measured in the same run (bytes read + written). The compute-bound workloads
(COMPUTE_WORKLOADS) are timed at every bench shape and reported in their own table: TFLOP/s
(workload.flops over the median) and the fraction of torch.matmul's rate at 8192^3 measured in
the same run (fp32 with TF32 off for sgemm, bf16 for the tensor-core workloads).

A naive kernel that takes more than 200 ms per launch is timed once (one launch, no
repetitions): the whole-vector sum's naive kernel is one thread walking 2^28 elements.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
import traceback
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from klineage.corpus import COMPUTE_BOUND, MEMORY_BOUND, corpus_dir
from klineage.timing_bench.gpu import build_all, log, time_variant  # one home, shared

ROOT = Path(__file__).resolve().parents[1]
CORPUS = corpus_dir()
WORKLOADS = MEMORY_BOUND  # table order
COMPUTE_WORKLOADS = COMPUTE_BOUND


@dataclass
class VariantResult:
    name: str
    built: bool = False
    build_error: str = ""
    check: str = "not run"
    median_ms: float | None = None
    min_ms: float | None = None
    max_ms: float | None = None
    reps: int = 0
    trials: int = 0
    verify: str = ""


@dataclass
class WorkloadResult:
    workload: str
    bench_shape: dict[str, int]
    bytes_moved: int
    variants: dict[str, VariantResult] = field(default_factory=dict)
    torch_ms: float | None = None
    error: str = ""
    flops: float | None = None
    #: which measured matmul rate the TFLOP/s compare with ("fp32" or "bf16"); compute corpus only
    peak: str = ""


def copy_bandwidth(nbytes: int = 1 << 30) -> float:
    """Device-to-device copy, bytes read + written per second (median of 20 copies)."""
    import torch

    from klineage.gates.cuda.stats import median

    src = torch.randn(nbytes // 4, device="cuda")
    dst = torch.empty_like(src)
    for _ in range(3):
        dst.copy_(src)
    torch.cuda.synchronize()
    times = []
    for _ in range(20):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        dst.copy_(src)
        b.record()
        b.synchronize()
        times.append(a.elapsed_time(b))
    del src, dst
    torch.cuda.empty_cache()
    return 2.0 * nbytes / (median(times) / 1000.0)


def matmul_rate(dtype_name: str, n: int = 8192) -> float:
    """FLOP/s of torch.matmul on n x n x n (median of 10; TF32 off for fp32): the compute-bound
    corpus's ceiling for its TFLOP/s column."""
    import torch

    from klineage.gates.cuda.stats import median

    torch.backends.cuda.matmul.allow_tf32 = False
    dtype = {"fp32": torch.float32, "bf16": torch.bfloat16}[dtype_name]
    a = torch.randn(n, n, device="cuda").to(dtype)
    b = torch.randn(n, n, device="cuda").to(dtype)
    for _ in range(3):
        a @ b
    torch.cuda.synchronize()
    times = []
    for _ in range(10):
        e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        e0.record()
        a @ b
        e1.record()
        e1.synchronize()
        times.append(e0.elapsed_time(e1))
    del a, b
    torch.cuda.empty_cache()
    return 2.0 * n**3 / (median(times) / 1000.0)


def run(args: argparse.Namespace) -> int:
    import torch

    from klineage import load_workload
    from klineage.gates.cuda.runner import CudaRunner
    from klineage.gates.protocol import check_workload

    out_dir = Path(args.out) if args.out else None
    if out_dir:
        out_dir.mkdir(parents=True, exist_ok=True)
    sink = open(out_dir / "corpus_bench.log", "w") if out_dir else None  # noqa: SIM115
    names = [w for w in WORKLOADS + COMPUTE_WORKLOADS if not args.only or w in args.only.split(",")]
    extra: dict[str, list[tuple[str, Path]]] = {}
    for spec in args.variant or []:
        wl, rest = spec.split(":", 1)
        label, path = rest.split("=", 1)
        extra.setdefault(wl, []).append((label, Path(path)))

    jobs: list[tuple[str, str, Path]] = []
    for wl in names:
        for var in ("expert", "naive"):
            jobs.append((wl, var, CORPUS / wl / f"{var}.cu"))
        jobs.extend((wl, label, path) for label, path in extra.get(wl, []))
    t0 = time.perf_counter()
    workroot = Path(tempfile.mkdtemp(prefix="corpus_bench_"))
    built = build_all(jobs, workroot)
    log(f"built {len(jobs)} kernels in {time.perf_counter() - t0:.1f} s", sink)

    device = torch.device("cuda", torch.cuda.current_device())
    dev_name = torch.cuda.get_device_name(device)
    copy_bps = copy_bandwidth()
    log(
        f"device {dev_name}; torch {torch.__version__}; copy bandwidth {copy_bps / 1e12:.3f} TB/s (read+write)",
        sink,
    )
    rates: dict[str, float] = {}
    if any(w in COMPUTE_WORKLOADS for w in names):
        rates = {k: matmul_rate(k) for k in ("fp32", "bf16")}
        log("matmul 8192^3: " + ", ".join(f"{k} {v / 1e12:.1f} TFLOP/s" for k, v in rates.items()), sink)

    results: list[WorkloadResult] = []
    for wl_name in names:
        wl = load_workload(CORPUS / wl_name)
        compute = wl_name in COMPUTE_WORKLOADS
        all_bench = wl.shape_set("bench") if compute else wl.shape_set("bench")[:1]
        variants = ["expert", "naive"] + [label for label, _ in extra.get(wl_name, [])]
        runners: dict[str, Any] = {}
        checks: dict[str, tuple[bool, str, str]] = {}
        for var in variants:
            b = built[(wl_name, var)]
            if not b.ok:
                checks[var] = (False, b.message, "not run")
                log(f"{wl_name}/{var}: BUILD FAILED: {b.message}", sink)
                continue
            runners[var] = CudaRunner(b.library, wl, device)
            status = "not run"
            if args.check:
                try:
                    v = check_workload(wl, runners[var], "test", seeds=(0, 1))
                    status = v.category if v.ok else f"{v.category}: {v.message}"
                except Exception as e:  # a fault: report it and keep going
                    status = f"error: {type(e).__name__}: {e}"
                log(f"{wl_name}/{var}: check {status}", sink)
            checks[var] = (True, "", status)
        for bindings in all_bench:
            res = WorkloadResult(wl_name, bindings, wl.bytes_moved(bindings))
            if compute:
                res.flops = wl.flops(bindings) if wl.flops else None
                res.peak = "fp32" if wl.dtypes == ["float32"] else "bf16"
            results.append(res)
            for var in variants:
                ok, msg, status = checks[var]
                res.variants[var] = VariantResult(var, built=ok, build_error=msg, check=status)
            _time_one(args, wl, wl_name, bindings, res, runners, device, sink)

    table = format_table([r for r in results if r.workload not in COMPUTE_WORKLOADS], copy_bps)
    ctable = format_compute_table([r for r in results if r.workload in COMPUTE_WORKLOADS], rates)
    stamp = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    header = f"{stamp}; {dev_name}; torch {torch.__version__}; copy {copy_bps / 1e12:.2f} TB/s"
    if rates:
        header += "; matmul " + ", ".join(f"{k} {v / 1e12:.1f} TFLOP/s" for k, v in rates.items())
    if out_dir:
        payload = {
            "date": stamp,
            "device": dev_name,
            "torch": torch.__version__,
            "copy_bytes_per_s": copy_bps,
            "matmul_flop_per_s": rates,
            "results": [asdict(r) for r in results],
        }
        (out_dir / "corpus_bench.json").write_text(json.dumps(payload, indent=1))
    log("", sink)
    log(header, sink)
    if any(r.workload not in COMPUTE_WORKLOADS for r in results):
        log(table, sink)
    if any(r.workload in COMPUTE_WORKLOADS for r in results):
        log(ctable, sink)
    if sink:
        sink.close()
    failed = any(
        r.error
        or any(v.check not in ("ok", "not run") or v.verify not in ("", "ok") for v in r.variants.values())
        for r in results
    )
    return 1 if failed else 0


def _time_one(
    args: argparse.Namespace,
    wl: Any,
    wl_name: str,
    bindings: dict[str, int],
    res: WorkloadResult,
    runners: dict[str, Any],
    device: Any,
    sink: Any,
) -> None:
    """Time every built variant and the vendor call at one bench shape; fills `res`."""
    import torch

    from klineage.gates.cuda.timing import Bench, timed, verify_after_timing

    try:
        bench = Bench(wl, bindings, device)
        stream = torch.cuda.current_stream(device)
        for var, runner in runners.items():
            vr = res.variants[var]
            if args.skip_naive and var == "naive":
                continue
            summary, reps, trials = time_variant(
                runner,
                bench,
                stream,
                args.naive_budget_s if var == "naive" else args.budget_s,
                slow_ok=var == "naive",
            )
            vr.median_ms, vr.min_ms, vr.max_ms = summary.median_ms, summary.min_ms, summary.max_ms
            vr.reps, vr.trials = reps, trials
            if var != "naive":
                msg = verify_after_timing(runner, bench, stream)
                breach = bench.breach()
                vr.verify = msg or breach or "ok"
            log(
                f"{wl_name}/{var}: {vr.median_ms:.4f} ms (min {vr.min_ms:.4f}, {trials}x{reps})"
                + (f" verify {vr.verify}" if vr.verify else ""),
                sink,
            )
        vendor = bench.vendor_call()
        tv = timed(vendor, bench.refill, stream, budget_s=args.budget_s)
        res.torch_ms = tv.summary.median_ms
        log(f"{wl_name}/torch: {res.torch_ms:.4f} ms", sink)
        del bench
        torch.cuda.empty_cache()
    except Exception as e:
        res.error = f"{type(e).__name__}: {e}"
        log(f"{wl_name}: ERROR {res.error}\n{traceback.format_exc()}", sink)


def _ms(x: float | None) -> str:
    return "-" if x is None else (f"{x:.4f}" if x < 10 else f"{x:.1f}")


def _ratio(a: float | None, b: float | None) -> str:
    return "-" if a is None or b is None or b <= 0 else f"{a / b:.2f}x"


def _bw(nbytes: int, ms: float | None, copy_bps: float) -> str:
    return "-" if ms is None or ms <= 0 else f"{100.0 * nbytes / (ms / 1000.0) / copy_bps:.0f}%"


def format_table(results: list[WorkloadResult], copy_bps: float) -> str:
    head = (
        "| workload | bench shape | expert ms | torch ms | naive ms | expert vs torch | expert vs naive "
        "| expert %copy | torch %copy |"
    )
    rows = [head, "|" + "---|" * 9]
    for r in results:
        e = r.variants.get("expert")
        n = r.variants.get("naive")
        e_ms = e.median_ms if e else None
        n_ms = n.median_ms if n else None
        shape = "x".join(f"{v}" for v in r.bench_shape.values())
        rows.append(
            f"| {r.workload} | {shape} | {_ms(e_ms)} | {_ms(r.torch_ms)} | {_ms(n_ms)}"
            f"{' (1 launch)' if n and n.reps == 1 else ''} | {_ratio(r.torch_ms, e_ms)} | {_ratio(n_ms, e_ms)} "
            f"| {_bw(r.bytes_moved, e_ms, copy_bps)} | {_bw(r.bytes_moved, r.torch_ms, copy_bps)} |"
        )
        for label, v in r.variants.items():
            if label not in ("expert", "naive"):
                rows.append(
                    f"| {r.workload} [{label}] | {shape} | {_ms(v.median_ms)} | | | "
                    f"{_ratio(r.torch_ms, v.median_ms)} | | {_bw(r.bytes_moved, v.median_ms, copy_bps)} | |"
                )
    return "\n".join(rows)


def _tflops(flops: float | None, ms: float | None) -> str:
    return "-" if flops is None or ms is None or ms <= 0 else f"{flops / (ms / 1000.0) / 1e12:.1f}"


def _pct(flops: float | None, ms: float | None, rate: float | None) -> str:
    return (
        "-"
        if flops is None or ms is None or ms <= 0 or not rate
        else f"{100.0 * flops / (ms / 1000.0) / rate:.0f}%"
    )


def format_compute_table(results: list[WorkloadResult], rates: dict[str, float]) -> str:
    """The compute-bound corpus: TFLOP/s (workload.flops over the median) and the fraction of the
    matmul rate measured in the same run (fp32 with TF32 off for sgemm, bf16 otherwise)."""
    head = (
        "| workload | bench shape | expert ms | torch ms | naive ms | expert vs torch | expert vs naive "
        "| expert TFLOP/s | torch TFLOP/s | expert % matmul | torch % matmul |"
    )
    rows = [head, "|" + "---|" * 11]
    for r in results:
        e = r.variants.get("expert")
        n = r.variants.get("naive")
        e_ms = e.median_ms if e else None
        n_ms = n.median_ms if n else None
        rate = rates.get(r.peak)
        shape = ",".join(f"{k}={v}" for k, v in r.bench_shape.items())
        rows.append(
            f"| {r.workload} | {shape} | {_ms(e_ms)} | {_ms(r.torch_ms)} | {_ms(n_ms)}"
            f"{' (1 launch)' if n and n.reps == 1 else ''} | {_ratio(r.torch_ms, e_ms)} | {_ratio(n_ms, e_ms)} "
            f"| {_tflops(r.flops, e_ms)} | {_tflops(r.flops, r.torch_ms)} | {_pct(r.flops, e_ms, rate)} "
            f"| {_pct(r.flops, r.torch_ms, rate)} |"
        )
        for label, v in r.variants.items():
            if label not in ("expert", "naive"):
                rows.append(
                    f"| {r.workload} [{label}] | {shape} | {_ms(v.median_ms)} | | | "
                    f"{_ratio(r.torch_ms, v.median_ms)} | | {_tflops(r.flops, v.median_ms)} | "
                    f"| {_pct(r.flops, v.median_ms, rate)} | |"
                )
    return "\n".join(rows)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument(
        "--check", action="store_true", help="run the correctness protocol on the test shapes first"
    )
    p.add_argument("--only", default="", help="comma-separated workloads (default: all)")
    p.add_argument("--out", default="", help="folder for corpus_bench.log and corpus_bench.json")
    p.add_argument("--budget-s", type=float, default=10.0, help="timing budget per expert / torch call")
    p.add_argument("--naive-budget-s", type=float, default=20.0, help="timing budget per naive kernel")
    p.add_argument(
        "--skip-naive", action="store_true", help="build and check the naive kernels but do not time them"
    )
    p.add_argument(
        "--variant",
        action="append",
        metavar="WORKLOAD:LABEL=PATH",
        help="also build, check and time another .cu for a workload (repeatable)",
    )
    args = p.parse_args(argv)
    try:
        import torch
    except ImportError:
        print("corpus_bench: torch is not importable", file=sys.stderr)
        return 2
    if not torch.cuda.is_available():
        print("corpus_bench: no CUDA GPU visible to torch", file=sys.stderr)
        return 2
    return run(args)


if __name__ == "__main__":
    sys.exit(main())
