"""Binary twins: a candidate whose compiled device code is byte-identical to one already gated
(same workload, options and toolchain) and whose host code differs only in comments and spacing
gets that gate's verdict, without a run on the device.

Why: many steps a materializer tries change the text but not what nvcc emits (`#pragma unroll`
on a loop the compiler unrolls anyway, `__restrict__` where nothing aliases, a `__launch_bounds__`
that changes no register count). Leave-one-out on an H100 (fourteenth session) gated 205 distinct
texts, 30 of them byte-identical in device code to an earlier text of the same workload, among
them five steps from reduce_sum's naive kernel at 7.4 s a launch: GPU time that measured nothing
new. The verdict of a `cuda` gate is a function of the built library, which is the device code
(the cubin compiled without line information, so moved lines do not count) and the host code;
the host code is compared as text with the device-only functions and every comment removed and
spacing collapsed, a stricter test than the machine code (any change to a constant the host also
sees, a macro, a launch, counts). Only for the `cuda` backend: the emulator reads the source
itself (its race and aliasing checks are about the text, not the binary). A twin's result says
whose verdict it reuses (`GateResult.twin_of`) and keeps its own compile stages.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from klineage.errors import SourceError
from klineage.gates import cache
from klineage.gates.result import GateResult

if TYPE_CHECKING:
    from klineage.source.model import CudaSource


def host_text(source: str | CudaSource) -> str | None:
    """The source without its device-only functions (`__global__`, and `__device__` not also
    `__host__`) and comments, spacing collapsed; None when it does not parse. Given a parsed
    source (the gate's parse stage already has one), it is not parsed again."""
    from klineage.source.model import CudaSource

    if isinstance(source, CudaSource):
        src = source
    else:
        try:
            src = CudaSource.from_text(source)
        except SourceError:
            return None
    cut: list[tuple[int, int]] = [
        (f.start, f.end)
        for f in src.functions
        if f.kind == "kernel" or (f.kind == "device" and "__host__" not in f.qualifiers)
    ]
    cut += [(n.start_byte, n.end_byte) for n in src.nodes_of_type("comment")]
    data = src.text_bytes
    kept, at = [], 0
    for start, end in sorted(cut):
        if start >= at:
            kept.append(data[at:start])
            at = end
        else:
            at = max(at, end)
    kept.append(data[at:])
    return re.sub(rb"\s+", b" ", b"".join(kept)).decode("utf-8", "replace").strip()


@dataclass
class Twins:
    """The twin index of one gate: `look` after the compile stage, `file` once a verdict exists."""

    workload_fingerprint: str
    options: dict[str, Any]
    toolchain: str
    root: Path | None = None
    key: str | None = None

    def look(self, source: CudaSource, cubin: Path) -> GateResult | None:
        """The verdict of an earlier binary twin, or None (and then `file` records this one)."""
        host = host_text(source)
        if host is None:
            return None
        try:
            device = hashlib.sha256(cubin.read_bytes()).hexdigest()
        except OSError:
            return None
        # the gate's own cache key, over what the verdict depends on instead of the source text
        self.key = cache.cache_key(
            f"twin {device}\n{host}", self.workload_fingerprint, self.options, self.toolchain
        )
        earlier = cache.recall(self.key, self.root)
        if earlier is None or not cache.reusable(earlier):
            return None
        return earlier

    def file(self, key: str) -> None:
        """Note that the verdict filed under `key` is this binary's."""
        if self.key is not None:
            cache.remember(self.key, key, self.root)
