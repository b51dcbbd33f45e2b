"""Benchmark of the emu backend (issue 3): barrier crossings/s, shuffle rendezvous/s, one full gate.

    .venv/bin/python benchmarks/emu_bench.py [--blocks 4000] [--repeat 3] [--sanitize] [--tc-only]

Tensor cores (issue 11): emulated mma.sync m16n8k16 (bf16, f32 accumulate) per second — warp-wide
operations, 8 warps issuing back-to-back MMAs (tests/kernels/emu_tc/tc.cu) —, and the wall time of
the emu gate on expert_kernels/gemm_bf16 (mma.sync + ldmatrix + cp.async) at its emu shapes
(falls back to tests/kernels/emu_tc/tc_gemm when the expert is absent).

Barrier crossings: a 256-thread block crossing 8 __syncthreads, many blocks; one crossing is one
thread passing one barrier. Shuffles: 256-thread blocks, 8 __shfl_xor_sync per lane; reported
per lane (one thread taking part) and per warp rendezvous. The gate: `gate()` of a small
shuffle/barrier reduction with compilation, 3 shapes x 2 seeds x 2 schedules, no cache. Figures
are best of `--repeat` (the machine may be shared).
"""

from __future__ import annotations

import argparse
import ctypes
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from klineage.gates.backend import GateOptions
from klineage.gates.emu import backend

REPO = Path(__file__).resolve().parent.parent
GATE_KERNEL = REPO / "tests" / "kernels" / "emu" / "rowsum" / "shfl_reduce.cu"
GATE_WORKLOAD = REPO / "tests" / "kernels" / "emu" / "rowsum"

BENCH_CU = r"""
#include <cuda_runtime.h>
__global__ void bar8(float* out) {
  __shared__ float s[256];
  float v = threadIdx.x;
#pragma unroll
  for (int i = 0; i < 8; ++i) {
    s[threadIdx.x] = v;
    __syncthreads();
    v += s[(threadIdx.x + 1) % 256];
  }
  if (threadIdx.x == 0) out[blockIdx.x] = v;
}
__global__ void shfl8(float* out) {
  float v = threadIdx.x;
#pragma unroll
  for (int i = 0; i < 8; ++i) v += __shfl_xor_sync(0xffffffff, v, 1 << (i % 5));
  if (threadIdx.x == 0) out[blockIdx.x] = v;
}
__global__ void loop8(float* out) {
  float v = threadIdx.x;
  for (int i = 0; i < 8; ++i) v = v * 0.5f + 1.f;
  if (threadIdx.x == 0) out[blockIdx.x] = v;
}
extern "C" void run_bar(float* out, int blocks) { bar8<<<blocks, 256>>>(out); }
extern "C" void run_shfl(float* out, int blocks) { shfl8<<<blocks, 256>>>(out); }
extern "C" void run_loop(float* out, int blocks) { loop8<<<blocks, 256>>>(out); }
"""


def _best(fn, repeat: int) -> tuple[float, float]:
    """(best wall seconds, best CPU seconds of this thread): CPU time is what one core spent,
    which stays meaningful when other work shares the machine."""
    wall = cpu = float("inf")
    for _ in range(repeat):
        t0, c0 = time.perf_counter(), time.thread_time()
        fn()
        wall = min(wall, time.perf_counter() - t0)
        cpu = min(cpu, time.thread_time() - c0)
    return wall, cpu


def micro(blocks: int, repeat: int, sanitize: bool) -> dict[str, float]:
    work = Path(tempfile.mkdtemp(prefix="emu_bench_"))
    out = backend.build(BENCH_CU, work, GateOptions(sanitize=sanitize))
    if not out.ok:
        raise SystemExit(f"benchmark kernel failed to build: {out.message}")
    lib = ctypes.CDLL(str(out.library))
    buf = (ctypes.c_float * blocks)()
    lib.run_bar(buf, 4)  # stacks and caches warm
    w_bar, c_bar = _best(lambda: lib.run_bar(buf, blocks), repeat)
    w_shfl, c_shfl = _best(lambda: lib.run_shfl(buf, blocks), repeat)
    w_loop, c_loop = _best(lambda: lib.run_loop(buf, blocks), repeat)
    threads = blocks * 256
    return {
        "barrier_crossings_per_s": threads * 8 / w_bar,
        "barrier_crossings_per_cpu_s": threads * 8 / c_bar,
        "shuffle_lane_ops_per_s": threads * 8 / w_shfl,
        "shuffle_warp_rendezvous_per_s": threads // 32 * 8 / w_shfl,
        "shuffle_warp_rendezvous_per_cpu_s": threads // 32 * 8 / c_shfl,
        "plain_loop_threads_per_s": threads / w_loop,
        "plain_loop_threads_per_cpu_s": threads / c_loop,
    }


TC_CU = REPO / "tests" / "kernels" / "emu_tc" / "tc.cu"
TC_GEMM = REPO / "expert_kernels" / "gemm_bf16"


def tensor_cores(repeat: int, sanitize: bool, gate_too: bool) -> dict[str, float]:
    work = Path(tempfile.mkdtemp(prefix="emu_bench_tc_"))
    out = backend.build(TC_CU.read_text(), work, GateOptions(sanitize=sanitize))
    if not out.ok:
        raise SystemExit(f"tensor-core benchmark kernel failed to build: {out.message}")
    lib = ctypes.CDLL(str(out.library))
    a = (ctypes.c_uint32 * 128)(*[0x3F803F80] * 128)  # bf16 pairs of 1.0
    res = (ctypes.c_float * 1024)()
    warps, iters = 8, 4000
    lib.mma_loop(a, res, warps, 10)
    w, c = _best(lambda: lib.mma_loop(a, res, warps, iters), repeat)
    r = {"mma_m16n8k16_per_s": warps * iters / w, "mma_m16n8k16_per_cpu_s": warps * iters / c}
    if gate_too:
        from klineage.gates.gate import gate

        d = TC_GEMM if (TC_GEMM / "expert.cu").exists() else REPO / "tests" / "kernels" / "emu_tc" / "tc_gemm"
        kern = d / "expert.cu" if (d / "expert.cu").exists() else d / "kernel.cu"
        walls = []
        for _ in range(repeat):
            root = Path(tempfile.mkdtemp(prefix="emu_gate_tc_"))
            t0 = time.perf_counter()
            g = gate(kern, d, GateOptions(backend="emu", sanitize=sanitize), use_cache=False, cache_root=root)
            walls.append(time.perf_counter() - t0)
            if not g.accepted:
                raise SystemExit(f"tensor-core gate rejected: {g.category}: {g.message}")
        r["tc_gate_wall_s"] = min(walls)
        r["tc_gate_wall_median_s"] = sorted(walls)[len(walls) // 2]
        r["tc_gate_kernel"] = str(kern.relative_to(REPO))  # type: ignore[assignment]
    return r


def print_tc(t: dict, args: argparse.Namespace) -> None:
    print(
        f"mma.sync m16n8k16/s       {t['mma_m16n8k16_per_s'] / 1e3:8.1f} k warp-wide wall, "
        f"{t['mma_m16n8k16_per_cpu_s'] / 1e3:.1f} k per CPU-second  (bf16, f32 accumulate, 8 warps back to back)"
    )
    if "tc_gate_wall_s" in t:
        print(
            f"tensor-core gate wall     {t['tc_gate_wall_s']:8.2f} s  best of {args.repeat} "
            f"(median {t['tc_gate_wall_median_s']:.2f} s; {t['tc_gate_kernel']} at its emu shapes)"
        )


def hide_nvcc() -> None:
    """Drop nvcc from PATH so the gate runs only the emu build (as on a machine without CUDA)."""
    from klineage.gates import compile as nv

    dirs = [d for d in os.environ.get("PATH", "").split(os.pathsep) if not (Path(d) / "nvcc").exists()]
    os.environ["PATH"] = os.pathsep.join(dirs)
    nv.nvcc_version.cache_clear()


def full_gate(repeat: int, sanitize: bool) -> dict[str, float]:
    from klineage.gates.gate import gate

    walls: list[float] = []
    cpus: list[float] = []
    builds: list[float] = []
    for _ in range(repeat):
        root = Path(tempfile.mkdtemp(prefix="emu_gate_"))
        t0, c0 = time.perf_counter(), _cpu_with_children()
        r = gate(
            GATE_KERNEL,
            GATE_WORKLOAD,
            GateOptions(backend="emu", sanitize=sanitize),
            use_cache=False,
            cache_root=root,
        )
        walls.append(time.perf_counter() - t0)
        cpus.append(_cpu_with_children() - c0)
        if not r.accepted:
            raise SystemExit(f"benchmark gate rejected: {r.category}: {r.message}")
        t1 = time.perf_counter()
        backend.build(GATE_KERNEL.read_text(), root / "rebuild", GateOptions(sanitize=sanitize))
        builds.append(time.perf_counter() - t1)
    return {
        "gate_wall_s": min(walls),
        "gate_wall_median_s": sorted(walls)[len(walls) // 2],
        "gate_cpu_s": min(cpus),
        "emu_build_s": min(builds),
    }


def _cpu_with_children() -> float:
    """CPU seconds of this process and its finished children (compiler, gate child)."""
    me = resource.getrusage(resource.RUSAGE_SELF)
    ch = resource.getrusage(resource.RUSAGE_CHILDREN)
    return me.ru_utime + me.ru_stime + ch.ru_utime + ch.ru_stime


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--blocks", type=int, default=4000)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument(
        "--sanitize", action="store_true", help="AddressSanitizer build (the gate's sanitize option)"
    )
    ap.add_argument("--no-gate", action="store_true")
    ap.add_argument("--tc-only", action="store_true", help="only the tensor-core figures (issue 11)")
    ap.add_argument(
        "--without-nvcc",
        action="store_true",
        help="hide nvcc, so the gate does not also compile the kernel for resources",
    )
    args = ap.parse_args()
    if args.sanitize and "LD_PRELOAD" not in os.environ:
        # ASan must be the first library of the process running the kernels (as in the gate's
        # child): run the micro-benchmarks in a preloaded child, the gate from here.
        env = dict(os.environ, **backend.child_env(GateOptions(sanitize=True)))
        cmd = [
            sys.executable,
            __file__,
            "--sanitize",
            "--no-gate",
            "--blocks",
            str(args.blocks),
            "--repeat",
            str(args.repeat),
        ]
        subprocess.run(cmd, env=env, check=True)
        if args.without_nvcc:
            hide_nvcc()
        if not args.no_gate:
            print_gate(full_gate(args.repeat, True), args)
        return
    print(f"emu benchmark  cpus={os.cpu_count()}  toolchain={backend.toolchain()}  sanitize={args.sanitize}")
    if args.tc_only:
        if args.without_nvcc:
            hide_nvcc()
        print_tc(tensor_cores(args.repeat, args.sanitize, not args.no_gate), args)
        return
    m = micro(args.blocks, args.repeat, args.sanitize)
    print(
        f"barrier crossings/s       {m['barrier_crossings_per_s'] / 1e6:8.1f} M wall, "
        f"{m['barrier_crossings_per_cpu_s'] / 1e6:.1f} M per CPU-second  (256-thread blocks, 8 barriers, {args.blocks} blocks)"
    )
    print(
        f"shuffle rendezvous/s      {m['shuffle_warp_rendezvous_per_s'] / 1e6:8.2f} M warp-wide wall, "
        f"{m['shuffle_warp_rendezvous_per_cpu_s'] / 1e6:.2f} M per CPU-second  "
        f"({m['shuffle_lane_ops_per_s'] / 1e6:.1f} M lane-shuffles/s)"
    )
    print(
        f"plain-loop threads/s      {m['plain_loop_threads_per_s'] / 1e6:8.1f} M wall, "
        f"{m['plain_loop_threads_per_cpu_s'] / 1e6:.1f} M per CPU-second  (kernel without barriers)"
    )
    if args.without_nvcc:
        hide_nvcc()
    if not args.no_gate:
        print_gate(full_gate(args.repeat, args.sanitize), args)
    print_tc(tensor_cores(args.repeat, args.sanitize, not args.no_gate), args)


def print_gate(g: dict[str, float], args: argparse.Namespace) -> None:
    print(
        f"full gate wall time       {g['gate_wall_s']:8.2f} s  best of {args.repeat} "
        f"(median {g['gate_wall_median_s']:.2f} s; {g['gate_cpu_s']:.2f} CPU-s incl. children; "
        f"emu build alone {g['emu_build_s']:.2f} s{'; nvcc hidden' if args.without_nvcc else ''}"
        f"{'; ASan' if args.sanitize else ''})"
    )


if __name__ == "__main__":
    main()
