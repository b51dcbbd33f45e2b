"""C++ models of the Hopper PTX helpers the wgmma/TMA variants share (gemm_bf16's and
attention_fwd's expert_wgmma.cu), as the PTX ISA and the CUDA driver documentation describe them,
so the emulator can run the kernels' rings, phases, tiles and descriptor arithmetic: an mbarrier
phase completes when its pending arrivals reach zero and its transaction bytes are all counted; a
TMA copy lands at issue, zero-filling past the tensor, in the 128-byte swizzle (16-byte chunk c of
row r at chunk c ^ (r % 8)) and counts its bytes on the barrier; a wgmma operand is read through
the descriptor's start, leading and stride offsets with the swizzle applied to the shared address.
A waiting thread yields through a one-lane __syncwarp, so the emulator's fibers take turns. (The
gate compiles them with nvcc too.) They test the kernels against that reading of the
documentation, not the hardware."""

from __future__ import annotations

import subprocess
from pathlib import Path

from klineage.gates.backend import GateOptions
from klineage.gates.gate import gate

#: barriers, register reallocation and the wgmma fences: independent of the element type
SYNC_MODELS = r"""
struct KlBar { int count, pending, completed; long long tx; };
__device__ KlBar g_bars[64];  // by shared address: blocks run one after another on the emulator
__device__ __forceinline__ KlBar& kl_bar(uint32_t bar) { return g_bars[(bar / 8) % 64]; }
__device__ uint32_t g_window;  // the emulator's shared addresses carry a region id above the 18 bits a descriptor keeps
__device__ __forceinline__ uint32_t smem_u32(const void* p) { return (uint32_t)__cvta_generic_to_shared(p); }
__device__ __forceinline__ uint8_t* smem_bytes(uint32_t a) { return (uint8_t*)__cvta_shared_to_generic(a); }
__device__ __forceinline__ void bar_settle(KlBar& b) {
    if (b.pending == 0 && b.tx == 0) { b.completed += 1; b.pending = b.count; }
}
__device__ __forceinline__ void mbar_init(uint32_t bar, uint32_t count) {
    KlBar& b = kl_bar(bar); b.count = b.pending = (int)count; b.completed = 0; b.tx = 0;
}
__device__ __forceinline__ void fence_barrier_init() {}
__device__ __forceinline__ void mbar_expect_tx(uint32_t bar, uint32_t bytes) {
    KlBar& b = kl_bar(bar); b.tx += bytes; b.pending -= 1; bar_settle(b);
}
__device__ __forceinline__ void mbar_arrive(uint32_t bar) {
    KlBar& b = kl_bar(bar); b.pending -= 1;
    if (b.pending < 0) __trap();
    bar_settle(b);
}
__device__ __forceinline__ void mbar_wait(uint32_t bar, uint32_t parity) {
    while ((kl_bar(bar).completed & 1) == (int)parity) __syncwarp(1u << (threadIdx.x % 32));  // lets the others run
}
template <int kRegs> __device__ __forceinline__ void setmaxnreg_inc() {}
template <int kRegs> __device__ __forceinline__ void setmaxnreg_dec() {}
__device__ __forceinline__ void wgmma_fence() {}
__device__ __forceinline__ void wgmma_commit() {}
template <int kPending> __device__ __forceinline__ void wgmma_wait() {}
template <int kN> __device__ __forceinline__ void fence_accumulators(float (&)[kN]) {}
"""

#: the TMA copy and the descriptor read, for a 16-bit element type KL_ELEM
_COPY_MODELS = r"""
struct KlTensorMap { const KL_ELEM* base; int rows, cols, box_rows, box_cols; };
__device__ __forceinline__ void tma_load_2d(uint32_t dst, const KlTensorMap* map, int c0, int c1, uint32_t bar) {
    if (map->box_cols != 64) __trap();
    g_window = dst & ~0x3FFFFu;
    uint8_t* out = smem_bytes(dst);
    for (int r = 0; r < map->box_rows; ++r)
        for (int c = 0; c < 64; ++c) {
            const int row = c1 + r, col = c0 + c;
            const KL_ELEM v = (row < map->rows && col < map->cols) ? map->base[(size_t)row * map->cols + col]
                                                                   : KL_FROM_FLOAT(0.f);
            *reinterpret_cast<KL_ELEM*>(out + r * 128 + ((2 * c) ^ ((r % 8) << 4))) = v;
        }
    KlBar& b = kl_bar(bar); b.tx -= map->box_rows * 128; bar_settle(b);
}
__device__ __forceinline__ float kl_operand(uint64_t desc, int outer, int inner) {
    // element (outer, inner): inner runs along the 128-byte rows, outer along the 8-row groups and
    // (past 64 inner elements) the leading offset
    if ((desc >> 62) != 1) __trap();
    const uint32_t start = (uint32_t)(desc & 0x3FFF) << 4, lead = (uint32_t)((desc >> 16) & 0x3FFF) << 4;
    const uint32_t stride = (uint32_t)((desc >> 32) & 0x3FFF) << 4;
    const uint32_t a = g_window + start + (inner / 64) * lead + (outer / 8) * stride + (outer % 8) * 128 + (inner % 64) * 2;
    return KL_TO_FLOAT(*reinterpret_cast<const KL_ELEM*>(smem_bytes(a ^ (((a >> 7) & 7) << 4))));
}
// the accumulator fragment of an m64nN wgmma: element i of a thread is (kl_row(i), kl_col(i))
__device__ __forceinline__ int kl_row(int i) { return ((threadIdx.x % 128) / 32) * 16 + (threadIdx.x % 32) / 4 + 8 * ((i >> 1) & 1); }
__device__ __forceinline__ int kl_col(int i) { return (i >> 2) * 8 + (threadIdx.x % 4) * 2 + (i & 1); }
"""


#: the gemm_bf16 variant's cluster helpers for clusters of one block (the emulator has no clusters)
GEMM_CLUSTER_MODELS = r"""
__device__ __forceinline__ uint32_t cluster_rank() { return 0; }
__device__ __forceinline__ void cluster_sync() { __syncthreads(); }
__device__ __forceinline__ void mbar_arrive_cluster(uint32_t bar) { mbar_arrive(bar); }
"""
#: a multicast copy never issued by clusters of one block
GEMM_NO_MULTICAST = r"""
__device__ __forceinline__ void tma_load_2d_multicast(uint32_t, const KlTensorMap*, int, int, uint32_t) { __trap(); }
"""
#: the gemm_bf16 variant's wgmmas: A (K-major) and B (MN-major) read through their descriptors, each
#: thread adding into its own fragment
GEMM_WGMMA_MODELS = r"""
template <int kN>
__device__ __forceinline__ void kl_wgmma(float (&d)[kN / 2], uint64_t da, uint64_t db) {
    for (int i = 0; i < kN / 2; ++i) {
        float s = 0.f;
        for (int k = 0; k < 16; ++k) s = fmaf(kl_operand(da, kl_row(i), k), kl_operand(db, k, kl_col(i)), s);  // A K-major, B MN-major
        d[i] += s;
    }
}
__device__ __forceinline__ void wgmma_m64n128k16(float (&d)[64], uint64_t a, uint64_t b) { kl_wgmma<128>(d, a, b); }
__device__ __forceinline__ void wgmma_m64n256k16(float (&d)[128], uint64_t a, uint64_t b) { kl_wgmma<256>(d, a, b); }
"""


#: the 16-bit element types: name, conversion to float, conversion from float
_ELEMS = {
    "bf16": ("__nv_bfloat16", "__bfloat162float", "__float2bfloat16"),
    "f16": ("__half", "__half2float", "__float2half"),
}


def copy_models(elem: str) -> str:
    """The TMA and descriptor models for tensors of `elem` ("bf16" or "f16")."""
    name, to_float, from_float = _ELEMS[elem]
    text = _COPY_MODELS.replace("KL_TO_FLOAT", to_float).replace("KL_FROM_FLOAT", from_float)
    return text.replace("KL_ELEM", name)


def assert_emu_runs_hopper_kernel(kernel: Path, workload: Path) -> None:
    """The emu gate runs a Hopper kernel as written (gates/emu/ptx_hopper.py) and accepts it."""
    r = gate(kernel, workload, GateOptions(backend="emu"), use_cache=False)
    assert r.accepted, f"{r.category}: {r.message}"


def with_models(src: str, ptx_models: str, host_model: str, host_end: str) -> str:
    """A Hopper kernel with its PTX helpers region replaced by `ptx_models` and its host tensor-map
    code (from `using EncodeTiled` to the first `host_end` after it) by `host_model`, the tensor
    maps renamed to the models' and `__grid_constant__` defined away: no inline asm is left."""
    start, end = src.index("// ---- PTX helpers"), src.index("// ---- end of the PTX helpers")
    src = src[:start] + ptx_models + src[end:]
    start = src.index("using EncodeTiled")
    src = src[:start] + host_model + src[src.index(host_end, start) :]
    src = src.replace("CUtensorMap", "KlTensorMap").replace("#include <cuda.h>", "")
    src = src.replace("#include <stdio.h>", "#include <stdio.h>\n#define __grid_constant__\n", 1)
    assert "asm volatile" not in src and "asm(" not in src
    return src


def sm90a_ptxas(kernel: Path, out_dir: Path, defines: str = "") -> str:
    """ptxas's report (`-Xptxas -v`) of `kernel` compiled for sm_90a as the gate does, with
    `defines` (`A=1,B=2`) as -D flags; the compile must succeed."""
    cmd = ["nvcc", "-O3", "-std=c++17", "-gencode=arch=compute_90a,code=sm_90a", "-cubin", "-Xptxas", "-v"]
    cmd += [f"-D{d}" for d in defines.split(",") if d]
    proc = subprocess.run(
        [*cmd, "-o", str(out_dir / "k.cubin"), str(kernel)], capture_output=True, text=True, check=False
    )
    assert proc.returncode == 0, proc.stderr
    return proc.stderr
