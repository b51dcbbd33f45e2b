"""What the CPU emulator cannot run, found statically so the gate says `unsupported` before compiling.

Two tables are the extension points: `UNSUPPORTED_NAMES` (identifiers and the construct they stand
for) and `ASM_HANDLERS` (inline PTX instructions the emulator knows how to translate: gates/emu/ptx.py registers
mma.sync / ldmatrix / cp.async / cvta.to.shared / ex2.approx). Any inline `asm` whose instruction has no handler is
unsupported.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

import tree_sitter as ts

#: identifier -> the construct it reveals
UNSUPPORTED_NAMES: dict[str, str] = {
    "this_grid": "grid-wide synchronization (cooperative_groups::this_grid)",
    "grid_group": "grid-wide synchronization (cooperative_groups::grid_group)",
    "cudaLaunchCooperativeKernel": "cooperative launch with grid-wide sync (cudaLaunchCooperativeKernel)",
    "multi_grid_group": "multi-device synchronization (multi_grid_group)",
    "__cluster_dims__": "thread-block clusters (__cluster_dims__)",
    "cluster_group": "thread-block clusters (cluster_group)",
    "this_cluster": "thread-block clusters (this_cluster)",
    "cudaLaunchKernelEx": "cudaLaunchKernelEx (cluster / attribute launch)",
    "cudaLaunchKernel": "cudaLaunchKernel (launch through an argument array)",
    "__nanosleep": "__nanosleep spin-wait",
    "CUtensorMap": "TMA (CUtensorMap)",
    "cuTensorMapEncodeTiled": "TMA (cuTensorMapEncodeTiled)",
    "cp_async_bulk_tensor": "TMA (cp.async.bulk)",
    "wgmma": "wgmma (warpgroup matrix multiply)",
    "pipeline_shared_state": "cuda::pipeline of thread_block scope (pipeline_shared_state)",
    "thread_scope_block": "cuda::pipeline / cuda::barrier of thread_block scope",
    "tex1Dfetch": "texture memory (tex1Dfetch)",
    "tex2D": "texture memory (tex2D)",
    "tex3D": "texture memory (tex3D)",
    "cudaTextureObject_t": "texture objects",
    "cudaSurfaceObject_t": "surface objects",
    "cudaGraphLaunch": "CUDA graphs",
    "cudaStreamBeginCapture": "CUDA graphs (stream capture)",
}

#: include path prefix -> construct
UNSUPPORTED_INCLUDES: dict[str, str] = {
    "cuda/barrier": "cuda::barrier (asynchronous barriers / TMA)",
    "cooperative_groups/memcpy_async": "cooperative_groups::memcpy_async",
    "cuda/ptx": "cuda::ptx (inline PTX wrappers)",
    "cub/": "CUB library",
    "cutlass/": "CUTLASS library",
    "cute/": "CuTe library",
    "thrust/": "Thrust library",
    "cuda_awbarrier": "asynchronous barriers (cuda_awbarrier.h)",
}

#: PTX mnemonic prefix -> translator of the asm node to C++ (filled by gates/emu/ptx.py)
AsmHandler = Callable[[ts.Node, bytes], str]
ASM_HANDLERS: dict[str, AsmHandler] = {}

#: PTX families named more helpfully in the message
_PTX_WORDS = (
    ("cp.async.bulk", "TMA (cp.async.bulk)"),
    ("wgmma", "wgmma (warpgroup matrix multiply)"),
    ("mma.sync", "inline PTX mma.sync (only m16n8k16/m16n8k8 .row.col with f16/bf16 inputs are emulated)"),
    ("ldmatrix", "inline PTX ldmatrix (only m8n8 .x1/.x2/.x4 .shared.b16 is emulated)"),
    (
        "cp.async",
        "inline PTX cp.async (only .ca/.cg shared.global, commit_group, wait_group, wait_all are emulated)",
    ),
    ("barrier.cluster", "thread-block clusters (barrier.cluster)"),
    ("mbarrier", "asynchronous barriers (mbarrier)"),
)

_IDENT_TYPES = {"identifier", "field_identifier", "type_identifier", "namespace_identifier"}


@dataclass
class Unsupported(Exception):
    """A construct the emulator cannot run; `str()` is `file:line: construct cannot be emulated`."""

    construct: str
    line: int
    file: str = "kernel.cu"

    def __str__(self) -> str:
        return f"{self.file}:{self.line}: {self.construct} cannot be emulated on the CPU (emu backend)"


def asm_mnemonic(node: ts.Node, src: bytes) -> str:
    """First instruction of an inline-asm template, e.g. 'mma.sync.aligned.m16n8k16...'."""
    code = node.child_by_field_name("assembly_code")
    text = src[code.start_byte : code.end_byte].decode(errors="replace") if code else ""
    text = re.sub(r'"\s*"', "", text).strip('"').strip()
    for part in re.split(r"[;\n]|\\n", text):
        word = part.strip().strip("{}").strip()
        if word and not word.startswith(("//", ".reg", "{", "}")):
            return word.split()[0]
    return text.split()[0] if text.split() else "asm"


def describe_asm(mnemonic: str) -> str:
    for prefix, words in _PTX_WORDS:
        if mnemonic.startswith(prefix):
            return f'{words}: asm("{mnemonic} ...")'
    return f'inline PTX asm ("{mnemonic}")'


def asm_handler(mnemonic: str) -> AsmHandler | None:
    for prefix, fn in ASM_HANDLERS.items():
        if mnemonic.startswith(prefix):
            return fn
    return None


def scan(root: ts.Node, src: bytes, filename: str) -> None:
    """Raise Unsupported for the first construct (in source order) that cannot be emulated."""
    found: list[tuple[int, str]] = []
    stack = [root]
    while stack:
        n = stack.pop()
        t = n.type
        if t in _IDENT_TYPES:
            name = src[n.start_byte : n.end_byte].decode(errors="replace")
            if name in UNSUPPORTED_NAMES:
                found.append((n.start_byte, UNSUPPORTED_NAMES[name]))
            continue
        if t == "gnu_asm_expression":
            mnem = asm_mnemonic(n, src)
            if asm_handler(mnem) is None:
                found.append((n.start_byte, describe_asm(mnem)))
            continue
        if t == "preproc_include":
            path = n.child_by_field_name("path")
            inc = src[path.start_byte : path.end_byte].decode(errors="replace").strip('<>"') if path else ""
            for prefix, words in UNSUPPORTED_INCLUDES.items():
                if inc.startswith(prefix):
                    found.append((n.start_byte, f"{words} (#include <{inc}>)"))
            continue
        if t in ("comment", "string_literal", "raw_string_literal", "char_literal"):
            continue
        stack.extend(n.children)
    if found:
        pos, what = min(found)
        line = src.count(b"\n", 0, pos) + 1
        raise Unsupported(what, line, filename)
