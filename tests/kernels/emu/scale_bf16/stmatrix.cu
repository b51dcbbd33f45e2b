// y = 2x + 1 in bf16, 256 elements a warp: each lane holds its pairs of four 8 x 8 tiles in the
// ldmatrix fragment layout (row lane / 4, columns 2 (lane % 4) and + 1; with KL_TRANS = 1 the
// transposed one) and one stmatrix x4 writes the tiles to shared memory, which the warp copies out.
#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <stdint.h>

#ifndef KL_TRANS
#define KL_TRANS 0
#endif

__device__ __forceinline__ float value(const __nv_bfloat16* x, int i, int n) {
    return i < n ? 2.f * __bfloat162float(x[i]) + 1.f : 0.f;
}

__global__ void scale_stmatrix(const __nv_bfloat16* __restrict__ x, __nv_bfloat16* __restrict__ y, int n) {
    __shared__ __align__(16) __nv_bfloat16 tile[256];
    const int lane = threadIdx.x, g = lane / 4, t = lane % 4, base = blockIdx.x * 256;
    uint32_t r[4];
    for (int j = 0; j < 4; ++j) {
        const int lo = base + j * 64 + (KL_TRANS ? 2 * t * 8 + g : g * 8 + 2 * t);
        const int hi = lo + (KL_TRANS ? 8 : 1);
        const __nv_bfloat162 pair = __floats2bfloat162_rn(value(x, lo, n), value(x, hi, n));
        r[j] = *reinterpret_cast<const uint32_t*>(&pair);
    }
    const uint32_t row = static_cast<uint32_t>(__cvta_generic_to_shared(&tile[(lane / 8) * 64 + (lane % 8) * 8]));
#if KL_TRANS
    asm volatile("stmatrix.sync.aligned.m8n8.x4.trans.shared.b16 [%0], {%1, %2, %3, %4};" ::"r"(row), "r"(r[0]),
                 "r"(r[1]), "r"(r[2]), "r"(r[3])
                 : "memory");
#else
    asm volatile("stmatrix.sync.aligned.m8n8.x4.shared.b16 [%0], {%1, %2, %3, %4};" ::"r"(row), "r"(r[0]), "r"(r[1]),
                 "r"(r[2]), "r"(r[3])
                 : "memory");
#endif
    __syncwarp();
    for (int i = lane; i < 256; i += 32)
        if (base + i < n) y[base + i] = tile[i];
}

extern "C" void launch(const __nv_bfloat16* x, __nv_bfloat16* y, int N, cudaStream_t stream) {
    scale_stmatrix<<<(N + 255) / 256, 32, 0, stream>>>(x, y, N);
}
