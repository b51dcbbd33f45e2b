"""Write the Hopper variants' backward steps (deopt/setmaxnreg.py, wgmma.py, tma.py) to a folder,
in the order the gate can take them: gemm_bf16 setmaxnreg, wgmma, tma; attention_fwd wgmma,
setmaxnreg, tma (its three-consumer build does not compile without setmaxnreg while the wgmmas
hold their registers); and the wgmma test fixture (tests/data/deopt/wgmma/plain_loads) in each of
its layouts, as written and with its wgmmas rewritten. Usage: python hopper_steps.py OUT_DIR  ->
OUT_DIR/<workload>_s<k>.cu, OUT_DIR/plain_<layout>.cu, OUT_DIR/plain_<layout>_removed.cu"""

from __future__ import annotations

import sys
from pathlib import Path

from klineage.deopt.registry import get_operator
from klineage.source.model import CudaSource

PLAIN = Path("tests/data/deopt/wgmma/plain_loads/expert.cu")
LAYOUTS = {
    "sw128": "128 1 0",
    "sw64": "64 1 0",
    "sw32": "32 1 0",
    "none_k": "0 0 0",
    "sw64_k": "64 0 0",
    "h_sw128": "128 1 1",
}
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
    for name, knobs in LAYOUTS.items():
        swizzle, b_mn, acc_f16 = knobs.split()
        text = (
            f"#define KL_SWIZZLE {swizzle}\n#define KL_B_MN {b_mn}\n#define KL_ACC_F16 {acc_f16}\n"
            + PLAIN.read_text()
        )
        (out / f"plain_{name}.cu").write_text(text)
        src = CudaSource.from_text(text)
        op = get_operator("wgmma")
        (site,) = op.find(src)
        (out / f"plain_{name}_removed.cu").write_text(op.remove(src, site).text)


if __name__ == "__main__":
    main(Path(sys.argv[1]))
