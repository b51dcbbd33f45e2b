"""Hopper's tensor memory accelerator (TMA): bulk tensor copies back to copies a thread does.

A TMA copy (`cp.async.bulk.tensor.Nd`, sm_90) moves a box of a tensor between global and shared
memory asynchronously, described by a tensor map the host encodes (`cuTensorMapEncodeTiled`:
base, sizes, strides, box, swizzle, out-of-bounds fill), and completes on an mbarrier by counting
its bytes (`complete_tx`). Removal (one site per file: the maps, the copies and their barriers
only mean something together) makes every copy synchronous, done at issue by the issuing thread:
- host: the encoder is ours (`kl_tma_encode_tiled`, the driver's signature), reached where the
  code reached the driver's (a direct call, or `cudaGetDriverEntryPoint[ByVersion]` for
  "cuTensorMapEncodeTiled"); it writes a plain description into the 128-byte CUtensorMap;
- device: a global-to-shared tensor copy becomes `kl_tma_load`, which reads that description,
  copies the box element by element into shared memory with the map's swizzle applied to the
  shared address (the pattern a wgmma descriptor reads), zero-fills past the tensor, then counts
  the bytes on the barrier with `mbarrier.complete_tx`; with `.multicast::cluster` it does so in
  every block of the mask (`mapa`). A shared-to-global tensor store becomes `kl_tma_store` (writes
  past the tensor dropped), a non-tensor bulk load a byte copy; tensor prefetches go; bulk
  commit/wait groups go; `fence.proxy.async` statements go when no wgmma (the other async-proxy
  reader) is left in the file.
That keeps the function: an asynchronous copy may land any time between issue and the barrier's
phase, so a kernel correct with it is correct when it lands at issue (the argument of the cp.async
pipeline step, `pipeline.py`).

Refused with the reason: im2col maps, reductions (`cp.reduce.async.bulk`), maps reached some other
way (`cuGetProcAddress`), or bulk forms this reading does not know. At run time the encoder refuses
interleaved layouts and element strides other than 1 (`CUDA_ERROR_NOT_SUPPORTED`), which the
kernel's own error path then reports. No mechanical `apply`: the forward step needs the tiles
staged in a TMA box's layout and a barrier per stage.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import tree_sitter as ts

from klineage.deopt import _cexpr as X
from klineage.deopt.base import Operator, Precondition, Site
from klineage.source import edit
from klineage.source.model import CudaSource

LOAD = re.compile(
    r"cp\.async\.bulk\.tensor\.(?P<rank>[1-5])d\.shared::(?:cluster|cta)\.global(?:\.tile)?"
    r"\.mbarrier::complete_tx::bytes(?P<mc>\.multicast::cluster)?(?P<hint>\.L2::cache_hint)?\s*"
    r"\[(?P<dst>%\d+)\]\s*,\s*\[(?P<map>%\d+)\s*,\s*\{(?P<coords>[^}]*)\}\s*\]\s*,\s*\[(?P<bar>%\d+)\]"
    r"(?P<tail>(?:\s*,\s*%\d+)*)\s*;"
)
STORE = re.compile(
    r"cp\.async\.bulk\.tensor\.(?P<rank>[1-5])d\.global\.shared::cta(?:\.tile)?\.bulk_group(?P<hint>\.L2::cache_hint)?\s*"
    r"\[(?P<map>%\d+)\s*,\s*\{(?P<coords>[^}]*)\}\s*\]\s*,\s*\[(?P<src>%\d+)\](?P<tail>(?:\s*,\s*%\d+)*)\s*;"
)
BULK_LOAD = re.compile(
    r"cp\.async\.bulk\.shared::(?:cluster|cta)\.global\.mbarrier::complete_tx::bytes(?P<hint>\.L2::cache_hint)?\s*"
    r"\[(?P<dst>%\d+)\]\s*,\s*\[(?P<src>%\d+)\]\s*,\s*(?P<size>%\d+)\s*,\s*\[(?P<bar>%\d+)\](?P<tail>(?:\s*,\s*%\d+)*)\s*;"
)
#: statements that only order or prefetch the copies: deleted with them
DROPPED = re.compile(
    r"^\s*(?:cp\.async\.bulk\.(?:commit_group|wait_group(?:\.read)?\s+(?:%\d+|\d+))|"
    r"cp\.async\.bulk\.prefetch\.tensor\.[^;]*|prefetch\.tensormap\s*\[[^\]]*\])\s*;?\s*$"
)
REFUSED_HOST = re.compile(r"\b(cuGetProcAddress\w*|cuTensorMapEncodeIm2col\w*)\b")
ENCODE = "cuTensorMapEncodeTiled"
ENTRY_POINTS = {
    "cudaGetDriverEntryPoint": "kl_tma_entry_point",
    "cudaGetDriverEntryPointByVersion": "kl_tma_entry_point_by_version",
    ENCODE: "kl_tma_encode_tiled",
}

HELPER = r"""
// KLineage TMA (see deopt/tma.py): tensor maps hold a plain description, and the copies they
// describe are done at issue by the issuing thread, swizzle and zero fill included.
#include <cuda.h>
#include <stdint.h>
#include <string.h>
struct KlTmaMap {
    const unsigned char* base;
    unsigned long long strides[4];  // bytes between consecutive indices of dims 1..4
    unsigned dims[5];
    unsigned short box[5];
    unsigned char rank, elem, swizzle, nan_fill;
};
static_assert(sizeof(KlTmaMap) <= sizeof(CUtensorMap), "a description fits in a CUtensorMap");
inline CUresult kl_tma_encode_tiled(CUtensorMap* map, CUtensorMapDataType type, cuuint32_t rank, void* base,
                                    const cuuint64_t* dims, const cuuint64_t* strides, const cuuint32_t* box,
                                    const cuuint32_t* element_strides, CUtensorMapInterleave interleave,
                                    CUtensorMapSwizzle swizzle, CUtensorMapL2promotion, CUtensorMapFloatOOBfill fill) {
    static const unsigned char sizes[] = {1, 2, 4, 4, 8, 8, 2, 4, 8, 2, 4, 4, 4};  // CU_TENSOR_MAP_DATA_TYPE_*
    if (map == nullptr || rank < 1 || rank > 5 || (unsigned)type >= sizeof(sizes)) return CUDA_ERROR_INVALID_VALUE;
    if (interleave != CU_TENSOR_MAP_INTERLEAVE_NONE) return CUDA_ERROR_NOT_SUPPORTED;
    KlTmaMap m;
    memset(&m, 0, sizeof(m));
    m.base = static_cast<const unsigned char*>(base);
    m.rank = (unsigned char)rank;
    m.elem = sizes[type];
    m.swizzle = swizzle == CU_TENSOR_MAP_SWIZZLE_128B ? 128 : swizzle == CU_TENSOR_MAP_SWIZZLE_64B ? 64
              : swizzle == CU_TENSOR_MAP_SWIZZLE_32B ? 32 : 0;
    if (swizzle != CU_TENSOR_MAP_SWIZZLE_NONE && m.swizzle == 0) return CUDA_ERROR_NOT_SUPPORTED;
    m.nan_fill = fill != CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE;
    for (cuuint32_t d = 0; d < rank; ++d) {
        if (element_strides != nullptr && element_strides[d] != 1) return CUDA_ERROR_NOT_SUPPORTED;
        if (box[d] < 1 || box[d] > 256 || dims[d] > 0xFFFFFFFFull) return CUDA_ERROR_INVALID_VALUE;
        m.dims[d] = (unsigned)dims[d];
        m.box[d] = (unsigned short)box[d];
        if (d > 0) m.strides[d - 1] = strides[d - 1];
    }
    memset(map, 0, sizeof(*map));
    memcpy(map, &m, sizeof(m));
    return CUDA_SUCCESS;
}
inline cudaError_t kl_tma_entry_point_by_version(const char* symbol, void** fn, unsigned version,
                                                 unsigned long long flags,
                                                 cudaDriverEntryPointQueryResult* status = nullptr) {
    if (strcmp(symbol, "cuTensorMapEncodeTiled") == 0) {
        *fn = reinterpret_cast<void*>(&kl_tma_encode_tiled);
        if (status != nullptr) *status = cudaDriverEntryPointSuccess;
        return cudaSuccess;
    }
    return cudaGetDriverEntryPointByVersion(symbol, fn, version, flags, status);
}
inline cudaError_t kl_tma_entry_point(const char* symbol, void** fn, unsigned long long flags,
                                      cudaDriverEntryPointQueryResult* status = nullptr) {
    return kl_tma_entry_point_by_version(symbol, fn, CUDART_VERSION, flags, status);
}
// The shared address an element at byte `offset` of a box landing at `dst` takes under the swizzle.
__device__ __forceinline__ uint32_t kl_tma_swizzled(uint32_t dst, uint32_t offset, unsigned swizzle) {
    const uint32_t a = dst + offset;
    return swizzle == 0 ? a : a ^ (((a >> 7) & (swizzle / 16 - 1)) << 4);
}
// Byte offset into the tensor of box element `i` at coordinates `c`, or -1 past the tensor.
__device__ __forceinline__ long long kl_tma_offset(const KlTmaMap& m, const int* c, unsigned i) {
    long long off = 0;
    for (int d = 0; d < m.rank; ++d) {
        const long long x = (long long)c[d] + i % m.box[d];
        i /= m.box[d];
        if (x < 0 || x >= (long long)m.dims[d]) return -1;
        off += x * (d == 0 ? (long long)m.elem : (long long)m.strides[d - 1]);
    }
    return off;
}
__device__ __forceinline__ unsigned kl_tma_elements(const KlTmaMap& m) {
    unsigned n = 1;
    for (int d = 0; d < m.rank; ++d) n *= m.box[d];
    return n;
}
__device__ __forceinline__ void kl_tma_complete(uint32_t bar, uint32_t bytes, unsigned rank, bool remote) {
    asm volatile("fence.proxy.async.shared::cta;\nfence.acq_rel.cluster;" ::: "memory");  // the copy, then the count
    if (!remote) {
        asm volatile("mbarrier.complete_tx.relaxed.cta.shared::cta.b64 [%0], %1;" ::"r"(bar), "r"(bytes) : "memory");
    } else {
        uint32_t there;
        asm volatile("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(there) : "r"(bar), "r"(rank));
        asm volatile("mbarrier.complete_tx.relaxed.cluster.shared::cluster.b64 [%0], %1;" ::"r"(there), "r"(bytes)
                     : "memory");
    }
}
// A tensor box into shared memory at `dst` of this block (mask 0) or of every block of `mask`.
__device__ __forceinline__ void kl_tma_load(uint32_t dst, const void* map, const int* c, uint32_t bar, uint32_t mask) {
    const KlTmaMap& m = *static_cast<const KlTmaMap*>(map);
    const unsigned n = kl_tma_elements(m);
    for (unsigned rank = 0; rank < (mask ? 16u : 1u); ++rank) {
        if (mask && !((mask >> rank) & 1)) continue;
        for (unsigned i = 0; i < n; ++i) {
            const long long off = kl_tma_offset(m, c, i);
            unsigned char* to = static_cast<unsigned char*>(__cvta_shared_to_generic(kl_tma_swizzled(dst, i * m.elem, m.swizzle)));
            if (mask) asm("mapa.u64 %0, %1, %2;" : "=l"(to) : "l"(to), "r"(rank));
            for (unsigned b = 0; b < m.elem; ++b)
                to[b] = off >= 0 ? m.base[off + b] : (m.nan_fill ? (unsigned char)(b + 1 == m.elem ? 0x7F : 0xFF) : 0);
        }
        kl_tma_complete(bar, n * m.elem, rank, mask != 0);
    }
}
// A shared-memory box at `src` into the tensor; elements past the tensor are not written.
__device__ __forceinline__ void kl_tma_store(const void* map, const int* c, uint32_t src) {
    const KlTmaMap& m = *static_cast<const KlTmaMap*>(map);
    const unsigned n = kl_tma_elements(m);
    for (unsigned i = 0; i < n; ++i) {
        const long long off = kl_tma_offset(m, c, i);
        if (off < 0) continue;
        const unsigned char* from = static_cast<const unsigned char*>(__cvta_shared_to_generic(kl_tma_swizzled(src, i * m.elem, m.swizzle)));
        for (unsigned b = 0; b < m.elem; ++b) const_cast<unsigned char*>(m.base)[off + b] = from[b];
    }
}
// A non-tensor bulk copy of `bytes` bytes into this block's shared memory.
__device__ __forceinline__ void kl_bulk_load(uint32_t dst, const void* src, uint32_t bytes, uint32_t bar) {
    unsigned char* to = static_cast<unsigned char*>(__cvta_shared_to_generic(dst));
    for (uint32_t b = 0; b < bytes; ++b) to[b] = static_cast<const unsigned char*>(src)[b];
    kl_tma_complete(bar, bytes, 0, false);
}
"""


_Copy = X.AsmRewrite  # a bulk copy statement and what replaces it


def _op(ops: list[X.AsmOperand], token: str) -> str | None:
    op = X.asm_operand(ops, token)
    return op.expr if op is not None else None


def _coords(ops: list[X.AsmOperand], text: str, rank: int) -> str | None:
    exprs = [_op(ops, t) for t in text.split(",")]
    if len(exprs) != rank or any(e is None for e in exprs):
        return None
    return f"const int kl_c[{rank}] = {{{', '.join(f'(int)({e})' for e in exprs)}}};"


def _copy(src: CudaSource, asm: ts.Node, body: str) -> _Copy | None:
    stmt = X.asm_statement(asm)
    if DROPPED.match(body):
        return _Copy(stmt, "")
    ops = X.asm_operands(src, asm)
    if m := LOAD.search(body):
        rank = int(m.group("rank"))
        tail = [t for t in m.group("tail").split(",") if t.strip()]
        coords = _coords(ops, m.group("coords"), rank)
        dst, mp, bar = (_op(ops, m.group(k)) for k in ("dst", "map", "bar"))
        if (
            coords is None
            or None in (dst, mp, bar)
            or len(tail) != bool(m.group("mc")) + bool(m.group("hint"))
        ):
            return _Copy(stmt, "", "a tensor load whose operands are not read")
        mask = f"(uint32_t)({_op(ops, tail[0])})" if m.group("mc") else "0u"
        return _Copy(
            stmt,
            f"{{ {coords} kl_tma_load((uint32_t)({dst}), (const void*)(uintptr_t)({mp}), kl_c, (uint32_t)({bar}), {mask}); }}",
        )
    if m := STORE.search(body):
        rank = int(m.group("rank"))
        coords = _coords(ops, m.group("coords"), rank)
        mp, s = _op(ops, m.group("map")), _op(ops, m.group("src"))
        if coords is None or mp is None or s is None:
            return _Copy(stmt, "", "a tensor store whose operands are not read")
        return _Copy(
            stmt, f"{{ {coords} kl_tma_store((const void*)(uintptr_t)({mp}), kl_c, (uint32_t)({s})); }}"
        )
    if m := BULK_LOAD.search(body):
        dst, s, size, bar = (_op(ops, m.group(k)) for k in ("dst", "src", "size", "bar"))
        if None in (dst, s, size, bar):
            return _Copy(stmt, "", "a bulk load whose operands are not read")
        return _Copy(
            stmt,
            f"kl_bulk_load((uint32_t)({dst}), (const void*)({s}), (uint32_t)({size}), (uint32_t)({bar}));",
        )
    if re.search(r"\bcp\.(?:reduce\.)?async\.bulk\b|\bprefetch\.tensormap\b", body):
        return _Copy(stmt, "", f"a bulk form this step does not rewrite: `{body.strip()[:50]}`")
    return None


@dataclass(frozen=True)
class _Parts:
    copies: list[_Copy]
    host: list[ts.Node]  # encoder and entry-point names to rename
    refused: list[str]


def _parts(src: CudaSource) -> _Parts:
    copies: list[_Copy] = []
    host: list[ts.Node] = []
    refused: list[str] = []
    for fn in X.code_functions(src):
        for n in X.walk(fn):
            if n.type == "gnu_asm_expression":
                c = _copy(src, n, X.asm_template(src, n))
                if c is not None:
                    copies.append(c)
                    if c.why:
                        refused.append(f"line {n.start_point.row + 1}: {c.why}")
    for n in X.walk(src.tree.root_node):  # the host code too: where the maps are encoded
        if n.type == "identifier":
            if src.text_of(n) in ENTRY_POINTS:
                if src.text_of(n) == ENCODE or any(ENCODE in src.text_of(a) for a in _call_args_of(n)):
                    host.append(n)
            elif REFUSED_HOST.fullmatch(src.text_of(n)):
                refused.append(f"line {n.start_point.row + 1}: tensor maps through `{src.text_of(n)}`")
    return _Parts(copies, host, refused)


def _call_args_of(name: ts.Node) -> list[ts.Node]:
    call = name.parent
    return X.call_args(call) if call is not None and call.type == "call_expression" else []


class Tma(Operator):
    name = "tma"
    category = "async_copy"
    intent = (
        "Move tiles with Hopper's tensor memory accelerator: one thread issues cp.async.bulk.tensor "
        "copies described by host-encoded tensor maps (swizzled boxes, zero fill past the tensor), "
        "completing on mbarriers by their byte counts, while the other warps compute."
    )

    def find(self, src: CudaSource) -> list[Site]:
        p = _parts(src)
        loads = [c for c in p.copies if c.text or c.why]
        if not loads:
            return []
        return [
            self.site(
                src,
                loads[0].stmt,
                f"{len(loads)} bulk copy statement(s), {len(p.host)} tensor-map encoder reference(s)",
                refused=" | ".join(p.refused),
            )
        ]

    def removal_preconditions(self, src: CudaSource, site: Site) -> list[Precondition]:
        p = _parts(src)
        tensor = any("kl_tma_load" in c.text or "kl_tma_store" in c.text for c in p.copies)
        return [
            Precondition(
                "known_bulk_forms",
                not p.refused,
                "every bulk copy is a tiled tensor load/store or a plain bulk load, maps encoded by "
                "cuTensorMapEncodeTiled"
                if not p.refused
                else "; ".join(p.refused),
                "Pipeline",
            ),
            Precondition(
                "maps_encoded_here",
                bool(p.host) or not tensor,
                f"the file encodes its tensor maps ({ENCODE}, directly or through the runtime's driver entry point)"
                if p.host or not tensor
                else f"no {ENCODE} in the file: the maps' layout would be the driver's",
                "Pipeline",
            ),
        ]

    def _remove(self, src: CudaSource, site: Site) -> CudaSource:
        p = _parts(src)
        edits = [edit.replace(c.stmt, c.text) if c.text else edit.delete(src, c.stmt) for c in p.copies]
        edits += [edit.replace(n, ENTRY_POINTS[src.text_of(n)]) for n in p.host]
        if "wgmma.mma_async" not in src.text:  # no async-proxy reader is left: its fences go too
            edits += [edit.delete(src, s) for s in X.async_proxy_fences(src)]
        if "kl_tma_load" not in src.text:
            pos = X.after_includes(src)
            edits.append(edit.Edit(pos, pos, HELPER))
        return edit.apply_edits(src, edits)
