"""`__launch_bounds__(threads[, minBlocks])`: tells the compiler the largest block it will run
with, so it can budget registers for occupancy instead of for 1024 threads."""

from __future__ import annotations

import re

from klineage.deopt.base import Operator, Precondition, Site
from klineage.source import edit
from klineage.source.model import CudaSource


def _int(text: str, src: CudaSource) -> int | None:
    text = text.strip()
    if re.fullmatch(r"\d+[uU]?", text):
        return int(text.rstrip("uU"))
    m = re.search(rf"constexpr\s+(?:int|unsigned|auto)\s+{re.escape(text)}\s*=\s*(\d+)", src.text)
    if m:
        return int(m.group(1))
    m = re.search(rf"#define\s+{re.escape(text)}\s+\(?(\d+)\)?", src.text)
    return int(m.group(1)) if m else None


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
        return sites

    def preconditions(self, src: CudaSource, site: Site) -> list[Precondition]:
        kernel = site.details["kernel"]
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
        (threads,) = {_int(b, src) for _, b in self._block_sizes(src, site.details["kernel"])}
        decl = next(c for c in node.children if c.type == "function_declarator")
        return edit.apply_edits(
            src, [edit.Edit(decl.start_byte, decl.start_byte, f"__launch_bounds__({threads}) ")]
        )
