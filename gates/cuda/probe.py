"""One launch of a built candidate in a process of its own, for tools that wrap a whole process
(compute-sanitizer, ncu). Inputs and poisoned outputs are made before the launch; with
`--profile-range` only the launch sits between cudaProfilerStart and cudaProfilerStop, so ncu
(`--profile-from-start off`) profiles the candidate's kernels and none of torch's.

Usage: python -m klineage.gates.cuda.probe LIBRARY WORKLOAD_DIR [--shape JSON] [--seed N] [--profile-range]
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import torch

from klineage.gates.cuda.runner import CudaRunner
from klineage.workload import Scalar, Workload, load_workload


def probe_command(
    library: Path, workload_dir: Path, bindings: Mapping[str, int], seed: int = 0, profile_range: bool = False
) -> list[str]:
    """The argv that runs one launch of `library` at `bindings`."""
    cmd = [
        sys.executable,
        "-m",
        "klineage.gates.cuda.probe",
        str(library),
        str(workload_dir),
        "--shape",
        json.dumps(dict(bindings)),
        "--seed",
        str(seed),
    ]
    return cmd + (["--profile-range"] if profile_range else [])


def arguments(workload: Workload, bindings: Mapping[str, int], seed: int, device: torch.device) -> list[Any]:
    host = workload.make_inputs(bindings, seed)
    values: list[Any] = []
    for a in workload.args:
        if isinstance(a, Scalar):
            values.append(host[a.name])
        elif a.is_read:
            values.append(host[a.name].to(device))
        else:
            t = torch.empty(workload.tensor_shape(a, bindings), dtype=a.torch_dtype, device=device)
            # poison; a plain allocation so a sanitizer sees its exact bounds (reshape: 0-dim outputs)
            t.reshape(-1).view(torch.uint8).fill_(0xFF)
            values.append(t)
    return values


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="klineage.gates.cuda.probe")
    p.add_argument("library")
    p.add_argument("workload_dir")
    p.add_argument("--shape", default="")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--profile-range", action="store_true")
    ns = p.parse_args(argv)
    wl = load_workload(ns.workload_dir)
    bindings = json.loads(ns.shape) if ns.shape else wl.shape_set("test")[0]
    runner = CudaRunner(Path(ns.library), wl)
    values = arguments(wl, bindings, ns.seed, runner.device)
    torch.cuda.synchronize()
    if ns.profile_range:
        torch.cuda.profiler.start()
    runner.launch_async(values)
    runner.synchronize()
    if ns.profile_range:
        torch.cuda.profiler.stop()
    print(f"probe: one launch at {bindings} done", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
