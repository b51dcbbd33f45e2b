"""Gate the removals of the parallel-structure operators on a GPU (`cuda` backend, correctness at
the workloads' test shapes, no timing): every site of warp_shuffle_reduce, cg_reduce, block_atomic,
coarsening, grid_stride, tile_size, online_softmax and register_blocking in the operator fixtures
(tests/data/deopt/*/*) and the expert corpus (expert_kernels/*, examples/*).

    source benchmarks/gpu_env.sh && python3 benchmarks/deopt_parallel_gpu.py --out "$OUT"

Prints one line per site (workload, operator, line, category) and writes the rows as JSON.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

from klineage.deopt.base import Refused
from klineage.deopt.registry import get_operator
from klineage.errors import KLineageError
from klineage.gates.backend import GateOptions
from klineage.gates.gate import gate
from klineage.source.model import CudaSource

ROOT = Path(__file__).resolve().parent.parent
OPS = (
    "warp_shuffle_reduce",
    "cg_reduce",
    "block_atomic",
    "coarsening",
    "grid_stride",
    "tile_size",
    "online_softmax",
    "register_blocking",
)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default="")
    ap.add_argument("--backend", default="cuda")
    args = ap.parse_args()
    folders = sorted(p.parent for p in ROOT.glob("tests/data/deopt/*/*/expert.cu"))
    folders += sorted(p.parent for p in ROOT.glob("expert_kernels/*/expert.cu"))
    folders += sorted(p.parent for p in ROOT.glob("examples/*/expert.cu"))
    rows = []
    t0 = time.time()
    for folder in folders:
        if not (folder / "workload.py").exists():
            continue
        src = CudaSource.from_file(folder / "expert.cu")
        base = gate(src.text, folder, GateOptions(backend=args.backend, time_kernel=False), name="expert.cu")
        rows.append(
            {
                "workload": folder.name,
                "op": "(expert)",
                "line": 0,
                "category": base.category,
                "message": (base.message or "")[:200],
            }
        )
        print(folder.name, "(expert)", base.category, flush=True)
        for name in OPS:
            op = get_operator(name)
            for site in op.find(src):
                row = {"workload": folder.name, "op": name, "line": site.line}
                try:
                    out = op.remove(src, site)
                except (Refused, KLineageError) as e:
                    row |= {"category": "refused", "message": str(e)[:200]}
                else:
                    r = gate(
                        out.text,
                        folder,
                        GateOptions(backend=args.backend, time_kernel=False),
                        name=f"{name}_{site.line}.cu",
                    )
                    row |= {"category": r.category, "message": (r.message or "")[:200]}
                rows.append(row)
                print(row["workload"], name, site.line, row["category"], row["message"][:120], flush=True)
    print(f"{len(rows)} rows in {time.time() - t0:.0f} s")
    if args.out:
        Path(args.out, "deopt_parallel_gpu.json").write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
