"""What the CPU emulator cannot run, found statically so the gate says `unsupported` before compiling.

Two tables are the extension points: `UNSUPPORTED_NAMES` (identifiers and the construct they stand
for) and `ASM_HANDLERS` (inline PTX instructions the emulator knows how to translate: gates/emu/ptx.py registers
mma.sync / ldmatrix / cp.async / cvta.to.shared / ex2.approx). Any inline `asm` whose instruction has no handler is
unsupported.

A kernel is refused at its first construct in source order, and the message names every other
kind of construct it holds too (each once, at its first line): a Hopper kernel (TMA, mbarrier,
wgmma, setmaxnreg) is told all of what stands between it and the emulator, not only the first.
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
    "cudaLaunchKernel": "cudaLaunchKernel (launch through an argument array)",
    "__nanosleep": "__nanosleep spin-wait",
    "cp_async_bulk_tensor": "TMA (cp.async.bulk)",
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
    ("cp.reduce.async.bulk", "TMA (cp.async.bulk)"),
    ("wgmma", "wgmma (warpgroup matrix multiply)"),
    ("mma.sync", "inline PTX mma.sync (only m16n8k16/m16n8k8 .row.col with f16/bf16 inputs are emulated)"),
    ("ldmatrix", "inline PTX ldmatrix (only m8n8 .x1/.x2/.x4 .shared.b16 is emulated)"),
    (
        "cp.async",
        "inline PTX cp.async (only .ca/.cg shared.global, commit_group, wait_group, wait_all are emulated)",
    ),
    ("barrier.cluster", "thread-block clusters (barrier.cluster)"),
    ("mapa", "thread-block clusters (mapa: distributed shared memory)"),
    ("%cluster_", "thread-block clusters (%cluster_* special registers)"),
    ("mbarrier", "asynchronous barriers (mbarrier)"),
    ("fence.mbarrier_init", "asynchronous barriers (mbarrier)"),
    ("fence.proxy.async", "async-proxy fences (fence.proxy.async)"),
    ("setmaxnreg", "warpgroup register reallocation (setmaxnreg)"),
    ("prefetch.tensormap", "TMA (prefetch.tensormap)"),
    ("elect.sync", "warp leader election (elect.sync)"),
    ("stmatrix", "stmatrix (shared-memory matrix store)"),
)

#: what may stand before a statement's instruction: a label (`WAIT:`, `WAIT%=:`; not `mapa.shared::x`)
#: and a predicate guard (`@p`, `@!p`)
LABEL_AND_GUARD = re.compile(r"^([A-Za-z_$][\w$]*(%=)?\s*:(?!:)\s*)?(@!?[A-Za-z_$][\w$]*\s+)?")

_IDENT_TYPES = {"identifier", "field_identifier", "type_identifier", "namespace_identifier"}


@dataclass
class Unsupported(Exception):
    """A construct the emulator cannot run; `str()` is `file:line: construct cannot be emulated`,
    followed by the other kinds of construct of the source (`also: ...`), if any."""

    construct: str
    line: int
    file: str = "kernel.cu"
    #: (construct, line) of the source's other kinds of unsupported construct
    others: tuple[tuple[str, int], ...] = ()

    def __str__(self) -> str:
        head = f"{self.file}:{self.line}: {self.construct} cannot be emulated on the CPU (emu backend)"
        if not self.others:
            return head
        return head + "; also: " + "; ".join(f"{what} (line {line})" for what, line in self.others)


def _template(node: ts.Node, src: bytes) -> str:
    code = node.child_by_field_name("assembly_code")
    text = src[code.start_byte : code.end_byte].decode(errors="replace") if code else ""
    return re.sub(r'"\s*"', "", text).strip('"').strip()


def asm_instructions(node: ts.Node, src: bytes) -> list[str]:
    """The instructions of an inline-asm template in order, e.g. ['setp.ne.b32', 'wgmma.mma_async...']
    (`.reg` declarations and comments left out); [] for an empty template."""
    out = []
    for part in re.split(r"[;\n]|\\n", _template(node, src)):
        word = part.strip().strip("{}").strip()
        word = LABEL_AND_GUARD.sub("", word)
        if word and not word.startswith(("//", ".reg", "{", "}")):
            out.append(word.split()[0])
    return out


def asm_mnemonic(node: ts.Node, src: bytes) -> str:
    """First instruction of an inline-asm template, e.g. 'mma.sync.aligned.m16n8k16...'; '' when
    the template is empty (a compiler fence)."""
    words = asm_instructions(node, src)
    return words[0] if words else ""


def asm_culprit(node: ts.Node, src: bytes) -> str:
    """The instruction that names an unsupported template best: the first one of a known family
    (a wgmma template may start with a `setp` that sets its scale predicate), else a cluster
    special register it reads (`mov.u32 %0, %%cluster_ctarank`), else the first instruction."""
    words = asm_instructions(node, src)
    named = [w for w in words if any(w.startswith(prefix) for prefix, _ in _PTX_WORDS)]
    registers = re.findall(r"%(%?cluster_\w+)", _template(node, src))
    return (named or [f"%{r.lstrip('%')}" for r in registers] or words or [""])[0]


def asm_family(mnemonic: str) -> str:
    """The construct an instruction belongs to ('asynchronous barriers (mbarrier)'), or the
    instruction itself when no family names it."""
    for prefix, words in _PTX_WORDS:
        if mnemonic.startswith(prefix):
            return words
    if not mnemonic:
        return "an empty inline asm statement (a compiler fence)"
    return f'inline PTX asm ("{mnemonic}")'


def describe_asm(mnemonic: str) -> str:
    """The construct and the instruction (or the special register, `%name`, a template reads)."""
    for prefix, words in _PTX_WORDS:
        if mnemonic.startswith(prefix):
            return (
                f"{words}: asm reads {mnemonic}"
                if mnemonic.startswith("%")
                else f'{words}: asm("{mnemonic} ...")'
            )
    return asm_family(mnemonic)


def asm_handler(mnemonic: str) -> AsmHandler | None:
    if not mnemonic:  # an empty template (a compiler fence on its operands): "" is its key
        return ASM_HANDLERS.get("")
    for prefix, fn in ASM_HANDLERS.items():
        if not prefix:
            continue
        if mnemonic.startswith(prefix):
            return fn
    return None


def scan(root: ts.Node, src: bytes, filename: str) -> None:
    """Raise Unsupported for the first construct (in source order) that cannot be emulated, naming
    the other kinds found (`Unsupported.others`)."""
    found: list[tuple[int, str, str]] = []  # (byte offset, kind, description)
    stack = [root]
    while stack:
        n = stack.pop()
        t = n.type
        if t in _IDENT_TYPES:
            name = src[n.start_byte : n.end_byte].decode(errors="replace")
            if name in UNSUPPORTED_NAMES:
                found.append((n.start_byte, UNSUPPORTED_NAMES[name], UNSUPPORTED_NAMES[name]))
            continue
        if t == "gnu_asm_expression":
            handler = asm_handler(asm_mnemonic(n, src))
            culprit = asm_culprit(n, src)
            if handler is None:
                found.append((n.start_byte, asm_family(culprit), describe_asm(culprit)))
            else:
                try:  # a known first instruction; the form, or a later one, may still be refused
                    handler(n, src)
                except Unsupported as e:
                    found.append((n.start_byte, asm_family(culprit), e.construct))
            continue
        if t == "preproc_include":
            path = n.child_by_field_name("path")
            inc = src[path.start_byte : path.end_byte].decode(errors="replace").strip('<>"') if path else ""
            for prefix, words in UNSUPPORTED_INCLUDES.items():
                if inc.startswith(prefix):
                    found.append((n.start_byte, words, f"{words} (#include <{inc}>)"))
            continue
        if t in ("comment", "string_literal", "raw_string_literal", "char_literal"):
            continue
        stack.extend(n.children)
    if not found:
        return
    first: dict[str, tuple[int, str]] = {}  # kind -> its first (offset, description)
    for pos, kind, what in sorted(found):
        first.setdefault(kind, (pos, what))
    (pos, what), *rest = first.values()
    line = src.count(b"\n", 0, pos) + 1
    others = tuple((w, src.count(b"\n", 0, p) + 1) for p, w in rest)
    raise Unsupported(what, line, filename, others)
