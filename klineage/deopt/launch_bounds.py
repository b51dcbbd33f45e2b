"""`__launch_bounds__(threads[, minBlocks])`: tells the compiler the largest block it will run
with, so it can budget registers for occupancy instead of for 1024 threads.

Forward, two steps. A kernel without bounds gets `(threads)`. A kernel whose bounds give only the
block size and that keeps a register tile (a local array of at least `MIN_TILE_WORDS` 4-byte
words: a register-blocked GEMM's accumulators, an attention kernel's fragments) also gets a
`minBlocks` that caps its registers at `REGISTER_CAP` a thread, where all its register arrays
together still fit with room for addresses and loop state: nvcc's unconstrained allocation for
such kernels leaves one block an SM (measured on the H100: the sgemm leave-one-out kernel with
hand-written 16-byte tile loads took 163 registers, 6.46 ms; capped at 128 by `(256, 2)`, 4.09 ms;
the cap alone on the loop's kernel, 4.68 -> 4.44 ms). A kernel whose arrays do not fit spills under
the cap (the leave-one-out flash attention kernel, 178 words of fragments and row state:
4.00 -> 7.45 ms under `(128, 4)` on the H100), so it is refused. Whether the cap pays is the GPU's
to say; the CPU judge sees the minBlocks argument appear. Removal takes the whole attribute
off, as the experts' lineages record it.
"""

from __future__ import annotations

import math
import re

import tree_sitter as ts

from klineage.deopt import _cexpr as X
from klineage.deopt.base import Operator, Precondition, Site
from klineage.deopt.gemm_loop import block_threads
from klineage.source import edit
from klineage.source.model import CudaSource
from klineage.source.syntax import eval_int, file_constants


def _int(text: str, src: CudaSource) -> int | None:
    """A block size's value: a literal or arithmetic over the file's constants (`constexpr`,
    `const`, `#define`, wherever declared)."""
    return eval_int(text, file_constants(src))


#: registers a thread may keep under the cap the minBlocks step sets (half the 255 nvcc allows)
REGISTER_CAP = 128
#: the smallest register tile (4-byte words a thread) that marks a kernel nvcc gives many registers
MIN_TILE_WORDS = 32
_WORDS = {
    "double": 2,
    "float4": 4,
    "int4": 4,
    "uint4": 4,
    "float2": 2,
    "__half": 0.5,
    "__nv_bfloat16": 0.5,
    "half": 0.5,
}
_SLOT = re.compile(r"\[([^\[\]]+)\]")


def register_arrays(src: CudaSource, fn: ts.Node) -> list[float]:
    """4-byte words of each local (not shared) array of `fn` whose sizes are compile-time
    constants: what a thread keeps in registers (its tile, fragments, row state)."""
    out, consts = [], file_constants(src)
    for d in X.walk(fn):
        if (
            d.type != "declaration"
            or "__shared__" in src.text_of(d)
            or "static" in src.text_of(d).split("[")[0]
        ):
            continue
        t = d.child_by_field_name("type")
        typ = src.text_of(t).strip() if t is not None else ""
        for dec in d.children_by_field_name("declarator"):
            target = dec.child_by_field_name("declarator") if dec.type == "init_declarator" else dec
            if target is None or target.type != "array_declarator":
                continue
            sizes = [eval_int(m.group(1), consts) for m in _SLOT.finditer(src.text_of(target))]
            if not sizes or any(n is None or n <= 0 for n in sizes):
                continue
            out.append(math.prod(sizes) * _WORDS.get(typ, 1))  # type: ignore[arg-type]
    return out


def register_tile_words(src: CudaSource, fn: ts.Node) -> float:
    """The largest register array of `fn` in 4-byte words (0 when there is none)."""
    return max(register_arrays(src, fn), default=0.0)


class LaunchBounds(Operator):
    name = "launch_bounds"
    category = "tuning"
    intent = "Declare __launch_bounds__ with the block size the kernel is always launched with, so register allocation targets that occupancy."
    mechanical_apply = True

    def find(self, src: CudaSource) -> list[Site]:
        sites = []
        for k in src.kernels:
            attr = next((a for a in k.attributes if a.name == "__launch_bounds__"), None)
            if attr is not None:
                sites.append(
                    self.site(
                        src,
                        src.node_for(k),
                        f"__launch_bounds__({', '.join(attr.args)}) on {k.name}",
                        kernel=k.name,
                        bounds=",".join(attr.args),
                        text=src.text_of((attr.start, attr.end)),
                    )
                )
        return sites

    def _remove(self, src: CudaSource, site: Site) -> CudaSource:
        k = next(k for k in src.kernels if k.name == site.details["kernel"])
        attr = next(a for a in k.attributes if a.name == "__launch_bounds__")
        end = attr.end
        if src.text_bytes[end : end + 1] == b" ":
            end += 1
        return edit.apply_edits(src, [edit.Edit(attr.start, end, "")])

    def _block_sizes(self, src: CudaSource, kernel: str) -> list[tuple[int, str]]:
        return [(ls.line, ls.block) for ls in src.launch_sites if ls.name == kernel]

    def find_forward(self, src: CudaSource) -> list[Site]:
        sites = []
        for k in src.kernels:
            if not k.launch_bounds and self._block_sizes(src, k.name):
                sites.append(
                    self.site(
                        src,
                        src.node_for(k),
                        f"kernel {k.name} could declare __launch_bounds__",
                        kernel=k.name,
                    )
                )
            elif len(k.launch_bounds) == 1 and register_tile_words(src, src.node_for(k)) >= MIN_TILE_WORDS:
                sites.append(
                    self.site(
                        src,
                        src.node_for(k),
                        f"kernel {k.name} keeps a register tile: a minBlocks could cap its registers",
                        kernel=k.name,
                        kind="min_blocks",
                    )
                )
        return sites

    def _min_blocks(self, src: CudaSource, kernel: str) -> tuple[int | None, list[Precondition]]:
        """The minBlocks that caps `kernel` at REGISTER_CAP registers, and why it may (not) be set."""
        k = next(k for k in src.kernels if k.name == kernel)
        threads = _int(k.launch_bounds[0], src) if k.launch_bounds else None
        if threads is None or not 0 < threads <= 1024:
            return None, [
                Precondition("fixed_block_size", False, f"bounds {k.launch_bounds} not a constant block size")
            ]
        blocks = 65536 // (REGISTER_CAP * threads)
        arrays = register_arrays(src, src.node_for(k))
        words, total = max(arrays, default=0.0), sum(arrays)
        return blocks, [
            Precondition("fixed_block_size", True, f"{kernel} runs blocks of {threads} threads"),
            Precondition(
                "cap_binds",
                blocks >= 2 and blocks * threads <= 2048,
                f"{blocks} blocks of {threads} threads an SM cap registers at {REGISTER_CAP} a thread",
            ),
            Precondition(
                "register_tile", words >= MIN_TILE_WORDS, f"its largest register array holds {words:g} words"
            ),
            Precondition(
                "arrays_fit_under_cap",
                total <= REGISTER_CAP - 32,
                f"its register arrays hold {total:g} words together, {REGISTER_CAP - 32} fit under the cap "
                "beside addresses and loop state",
            ),
        ]

    def _threads(self, src: CudaSource, kernel: str) -> int | None:
        """Threads per block of every launch of `kernel` (a `dim3` of constant expressions read
        through), when they agree."""
        return block_threads(src, [ls for ls in src.launch_sites if ls.name == kernel])

    def preconditions(self, src: CudaSource, site: Site) -> list[Precondition]:
        kernel = site.details["kernel"]
        if site.details.get("kind") == "min_blocks":
            return self._min_blocks(src, kernel)[1]
        threads = self._threads(src, kernel)
        if threads is not None:
            return [
                Precondition(
                    "fixed_block_size",
                    0 < threads <= 1024,
                    f"every launch uses {threads} threads per block",
                )
            ]
        sizes = self._block_sizes(src, kernel)
        values = {_int(b, src) for _, b in sizes}
        if not sizes:
            return [Precondition("fixed_block_size", False, f"no launch of {kernel} in this file")]
        if None in values:
            bad = next(f"line {line}: block '{b}'" for line, b in sizes if _int(b, src) is None)
            return [
                Precondition("fixed_block_size", False, f"block size not a compile-time constant ({bad})")
            ]
        if len(values) > 1:
            return [
                Precondition(
                    "fixed_block_size", False, f"launched with different block sizes {sorted(values)}"
                )
            ]
        (threads,) = values
        return [
            Precondition(
                "fixed_block_size",
                threads is not None and 0 < threads <= 1024,
                f"every launch uses {threads} threads per block",
            )
        ]

    def _apply(self, src: CudaSource, site: Site) -> CudaSource:
        node = src.node_at(site.anchor)
        assert node is not None
        if site.details.get("kind") == "min_blocks":
            k = next(k for k in src.kernels if k.name == site.details["kernel"])
            attr = next(a for a in k.attributes if a.name == "__launch_bounds__")
            blocks, _ = self._min_blocks(src, k.name)
            return edit.apply_edits(
                src, [edit.Edit(attr.start, attr.end, f"__launch_bounds__({attr.args[0]}, {blocks})")]
            )
        threads = self._threads(src, site.details["kernel"])
        if threads is None:
            (threads,) = {_int(b, src) for _, b in self._block_sizes(src, site.details["kernel"])}
        decl = next(c for c in node.children if c.type == "function_declarator")
        return edit.apply_edits(
            src, [edit.Edit(decl.start_byte, decl.start_byte, f"__launch_bounds__({threads}) ")]
        )
