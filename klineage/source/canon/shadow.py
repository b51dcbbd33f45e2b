"""No host name shadows a CUDA built-in: a launcher's local `gridDim` or `blockDim` (legal C++,
accepted by nvcc) becomes `grid_dim` / `block_dim`. Host code can never read the built-ins, so
every such identifier in a host function is a local of its own; the emulator defines the
built-ins as macros, where such a local does not compile.
"""

from __future__ import annotations

from klineage.source import edit
from klineage.source import syntax as S
from klineage.source.canon.base import Rule, host_functions
from klineage.source.edit import Edit
from klineage.source.model import CudaSource

BUILTINS = {
    "gridDim": "grid_dim",
    "blockDim": "block_dim",
    "blockIdx": "block_idx",
    "threadIdx": "thread_idx",
    "warpSize": "warp_size",
}


class HostShadowRename(Rule):
    name = "host_shadow_rename"
    summary = "host locals named like a CUDA built-in (gridDim, blockDim, ...) are renamed"

    def edits(self, src: CudaSource) -> list[Edit]:
        out: list[Edit] = []
        for fn in host_functions(src):
            idents = [n for n in S.walk(fn) if n.type == "identifier"]
            taken = {src.text_of(n) for n in idents}
            if not any(d for d in S.local_decls(fn) if d in BUILTINS):
                continue
            for n in idents:
                old = src.text_of(n)
                if old in BUILTINS:
                    new = BUILTINS[old]
                    while new in taken:
                        new += "_"
                    out.append(edit.replace(n, new))
        return out
