"""Write the Hopper variants' backward steps (deopt/setmaxnreg.py, wgmma.py, tma.py) to a folder,
in the order the gate can take them: gemm_bf16 setmaxnreg, wgmma, tma; attention_fwd wgmma,
setmaxnreg, tma (its three-consumer build does not compile without setmaxnreg while the wgmmas
hold their registers). Usage: python hopper_steps.py OUT_DIR  ->  OUT_DIR/<workload>_s<k>.cu"""

from __future__ import annotations

import sys
from pathlib import Path

from klineage.deopt.registry import get_operator
from klineage.source.model import CudaSource

ORDERS = {"gemm_bf16": ["setmaxnreg", "wgmma", "tma"], "attention_fwd": ["wgmma", "setmaxnreg", "tma"]}


def main(out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    for workload, steps in ORDERS.items():
        src = CudaSource.from_text(
            (Path("expert_kernels") / workload / "variants" / "expert_wgmma.cu").read_text()
        )
        for k, name in enumerate(steps, 1):
            op = get_operator(name)
            (site,) = op.find(src)
            src = op.remove(src, site)
            (out / f"{workload}_s{k}.cu").write_text(src.text)
            print(f"{workload}_s{k}.cu: {name} ({site.summary})")


if __name__ == "__main__":
    main(Path(sys.argv[1]))
