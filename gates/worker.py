"""Child-process entry of the gate: load the workload and the built library, run the shared
correctness protocol, then the backend's profile stage; write the verdict as JSON.

Usage (by gates/child.py only): python -m klineage.gates.worker PAYLOAD.json RESULT.json
"""

from __future__ import annotations

import json
import sys
import time
import traceback
from dataclasses import asdict
from pathlib import Path
from typing import Any

from klineage.gates.backend import GateOptions
from klineage.gates.backends import get_backend
from klineage.gates.protocol import check_workload
from klineage.workload import load_workload


def options_from(d: dict[str, Any]) -> GateOptions:
    d = dict(d)
    d["seeds"] = tuple(d.get("seeds", (0, 1)))
    d["nvcc_flags"] = tuple(d.get("nvcc_flags", ("-O3", "-std=c++17")))
    return GateOptions(**d)


def run(payload: dict[str, Any]) -> dict[str, Any]:
    t0 = time.perf_counter()
    options = options_from(payload["options"])
    backend = get_backend(options.backend)
    workload = load_workload(payload["workload_dir"])
    runner = backend.make_runner(Path(payload["library"]), workload, options)
    shape_set = options.shape_set or backend.DEFAULT_SHAPE_SET
    t1 = time.perf_counter()
    verdict = check_workload(workload, runner, shape_set=shape_set, seeds=options.seeds)
    t2 = time.perf_counter()
    out: dict[str, Any] = {
        "stage": "correctness",
        "category": verdict.category,
        "message": verdict.message,
        "checks": [asdict(c) for c in verdict.checks],
        "timing": None,
        "profile": {},
        # seconds per phase, for benchmarks (left in the run folder's result.json, not in the verdict)
        "phases": {"load_s": round(t1 - t0, 4), "correctness_s": round(t2 - t1, 4)},
    }
    if not verdict.ok:
        return out
    prof = backend.profile(runner, workload, options)
    out["phases"]["profile_s"] = round(time.perf_counter() - t2, 4)
    if prof is not None:
        out.update(stage="profile", timing=prof.timing, profile=prof.profile)
        if prof.category != "ok":
            out.update(category=prof.category, message=prof.message)
    return out


def main(argv: list[str]) -> int:
    payload_path, result_path = Path(argv[1]), Path(argv[2])
    payload = json.loads(payload_path.read_text())
    try:
        result = run(payload)
    except Exception as e:  # reported to the parent as a crash with the innermost frame
        tb = traceback.extract_tb(e.__traceback__)
        where = f" at {tb[-1].filename}:{tb[-1].lineno}" if tb else ""
        result = {
            "stage": "run",
            "category": "crash",
            "message": f"{type(e).__name__}: {e}{where}",
            "checks": [],
            "timing": None,
            "profile": {},
            "traceback": traceback.format_exc(),
        }
    tmp = result_path.with_suffix(".tmp")
    tmp.write_text(json.dumps(result))
    tmp.replace(result_path)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
