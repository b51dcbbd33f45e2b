// C = A B on Hopper wgmma, fp16 inputs, fp32 accumulators and output, any M, N, K. One warpgroup
// (128 threads) per 64 x 64 tile of C; for each 64-wide slice of K the threads copy A (64 x 64) and
// B (64 x 64) into dynamic shared memory themselves, in the layout a wgmma descriptor names, zero past the
// matrices, then the warpgroup issues four m64n64k16 wgmmas. Compile-time knobs:
//   KL_SWIZZLE   128, 64, 32 (that many bytes a swizzle row) or 0 (8 x 16-byte core matrices)
//   KL_B_MN      1: B kept N-contiguous (MN-major, imm-trans-b 1; needs a swizzle), 0: K-contiguous
//   KL_ACC_F16   1: f16 accumulators (two halves a register), widened to fp32 at the store
#include <cuda_runtime.h>
#include <cuda_fp16.h>
#include <stdint.h>

#ifndef KL_SWIZZLE
#define KL_SWIZZLE 128
#endif
#ifndef KL_B_MN
#define KL_B_MN 1
#endif
#ifndef KL_ACC_F16
#define KL_ACC_F16 0
#endif

namespace {

constexpr int kTile = 64;                  // rows, columns and K of a slice
constexpr int kRow = KL_SWIZZLE ? KL_SWIZZLE : 16;  // bytes of a layout row
constexpr int kMode = KL_SWIZZLE == 128 ? 1 : KL_SWIZZLE == 64 ? 2 : KL_SWIZZLE == 32 ? 3 : 0;
static_assert(!(KL_B_MN && KL_SWIZZLE == 0), "an MN-major operand needs a swizzle");

// Byte offset of element (outer, inner) of a 64 x 64 operand whose `inner` index is contiguous: rows
// of kRow bytes in atoms of 8 rows, the atoms of one inner chunk stacked along `outer` (8 kRow bytes
// apart), the inner chunks 64 kRow bytes apart; the swizzle XORs the 16-byte chunk with the row.
__device__ __forceinline__ uint32_t offset(int outer, int inner) {
    if (KL_SWIZZLE == 0)  // core matrices: 8 rows x 16 bytes; along inner 128 bytes apart, along outer 1024
        return (outer / 8) * 1024 + (inner / 8) * 128 + (outer % 8) * 16 + (inner % 8) * 2;
    const int per_row = kRow / 2;
    const uint32_t plain = (inner / per_row) * (64 * kRow) + outer * kRow + (inner % per_row) * 2;
    return plain ^ (((plain >> 7) & (kRow / 16 - 1)) << 4);
}

__device__ __forceinline__ uint64_t describe(uint32_t addr, uint32_t leading, uint32_t stride) {
    return (uint64_t)((addr & 0x3FFFF) >> 4) | ((uint64_t)((leading & 0x3FFFF) >> 4) << 16) |
           ((uint64_t)((stride & 0x3FFFF) >> 4) << 32) | ((uint64_t)kMode << 62);
}

// Descriptor of the k16 step `kk` of a tile at `base` whose inner index is K (K-major).
__device__ __forceinline__ uint64_t k_major(uint32_t base, int kk) {
    if (KL_SWIZZLE == 0) return describe(base + kk * 256, 128, 1024);
    const int per_row = kRow / 2;
    return describe(base + (kk * 16 / per_row) * (64 * kRow) + (kk * 16 % per_row) * 2, 16, 8 * kRow);
}

// Descriptor of the k16 step `kk` of a tile at `base` whose inner index is N (MN-major).
__device__ __forceinline__ uint64_t mn_major(uint32_t base, int kk) {
    return describe(base + kk * 16 * kRow, 64 * kRow, 8 * kRow);
}

// Accumulator i of this thread as a float: fp32 (4 per 8 columns) or a half of register i / 2.
#if !KL_ACC_F16
__device__ __forceinline__ float value(const float (&d)[32], int i) { return d[i]; }
__device__ __forceinline__ void mma(float (&d)[32], uint64_t da, uint64_t db) {
    asm volatile(
        "{\n.reg .pred p;\nsetp.ne.b32 p, %34, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n64k16.f32.f16.f16 "
        "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "
        "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}, "
        "%32, %33, p, 1, 1, 0, %35;\n}\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
          "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]),
          "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]),
          "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31])
        : "l"(da), "l"(db), "r"(1), "n"(KL_B_MN));
}
#else
__device__ __forceinline__ void mma(uint32_t (&d)[16], uint64_t da, uint64_t db) {
    asm volatile(
        "{\n.reg .pred p;\nsetp.ne.b32 p, %18, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n64k16.f16.f16.f16 "
        "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15}, %16, %17, p, 1, 1, 0, %19;\n}\n"
        : "+r"(d[0]), "+r"(d[1]), "+r"(d[2]), "+r"(d[3]), "+r"(d[4]), "+r"(d[5]), "+r"(d[6]), "+r"(d[7]),
          "+r"(d[8]), "+r"(d[9]), "+r"(d[10]), "+r"(d[11]), "+r"(d[12]), "+r"(d[13]), "+r"(d[14]), "+r"(d[15])
        : "l"(da), "l"(db), "r"(1), "n"(KL_B_MN));
}

__device__ __forceinline__ float value(const uint32_t (&d)[16], int i) {
    const __half2 h = *reinterpret_cast<const __half2*>(&d[i / 2]);
    return i % 2 ? __high2float(h) : __low2float(h);
}
#endif

__global__ void __launch_bounds__(128) gemm_wgmma(const __half* __restrict__ A, const __half* __restrict__ B,
                                                  float* __restrict__ C, int M, int N, int K) {
    extern __shared__ __align__(16) unsigned char smem[];  // the tiles, from a 1024-byte boundary on
    const uint32_t raw = (uint32_t)__cvta_generic_to_shared(smem);
    const uint32_t pad = ((raw + 1023u) & ~1023u) - raw;
    __half* sa = reinterpret_cast<__half*>(smem + pad);
    __half* sb = sa + kTile * kTile;
    const int m0 = blockIdx.y * kTile, n0 = blockIdx.x * kTile;
    const uint32_t a_base = raw + pad, b_base = a_base + kTile * kTile * 2;
#if KL_ACC_F16
    uint32_t d[16];
    for (int i = 0; i < 16; ++i) d[i] = 0u;
#else
    float d[32];
    for (int i = 0; i < 32; ++i) d[i] = 0.f;
#endif
    for (int k0 = 0; k0 < K; k0 += kTile) {
        for (int i = threadIdx.x; i < kTile * kTile; i += 128) {
            const int r = i / kTile, c = i % kTile;  // A: row r, column c of the slice
            const __half a = (m0 + r < M && k0 + c < K) ? A[(size_t)(m0 + r) * K + k0 + c] : __float2half(0.f);
            sa[offset(r, c) / 2] = a;
            const __half b = (k0 + r < K && n0 + c < N) ? B[(size_t)(k0 + r) * N + n0 + c] : __float2half(0.f);
            sb[(KL_B_MN ? offset(r, c) : offset(c, r)) / 2] = b;  // B: K row r, column c
        }
        __syncthreads();
        asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
        asm volatile("wgmma.fence.sync.aligned;" ::: "memory");
        for (int kk = 0; kk < kTile / 16; ++kk)
            mma(d, k_major(a_base, kk), KL_B_MN ? mn_major(b_base, kk) : k_major(b_base, kk));
        asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory");
        asm volatile("wgmma.wait_group.sync.aligned 0;" ::: "memory");
        __syncthreads();
    }
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    const int row = m0 + warp * 16 + lane / 4;
    for (int j = 0; j < 8; ++j) {
        const int col = n0 + j * 8 + 2 * (lane % 4);
        for (int h = 0; h < 2; ++h) {
            const int r = row + 8 * h;
            if (r >= M) continue;
            if (col < N) C[(size_t)r * N + col] = value(d, 4 * j + 2 * h);
            if (col + 1 < N) C[(size_t)r * N + col + 1] = value(d, 4 * j + 2 * h + 1);
        }
    }
}

}  // namespace

extern "C" void launch(const __half* A, const __half* B, float* C, int M, int N, int K, cudaStream_t stream) {
    const dim3 grid((N + kTile - 1) / kTile, (M + kTile - 1) / kTile);
    gemm_wgmma<<<grid, 128, 1024 + 2 * kTile * kTile * 2, stream>>>(A, B, C, M, N, K);
}
