// row_max, expert: the maximum of every row of an fp32 matrix.
//
// Rows of at most 1024 elements: one warp per row (8 rows per block), lanes stride the row, a
// shuffle tree at the end. Longer rows: one block per row, 128-bit loads with four in flight per
// thread and two running maxima, warp shuffles and then a shared array across warps. A maximum
// is exact in any order, so the result does not depend on the layout.
#include <cuda_runtime.h>
#include <math.h>
#include <stdint.h>

namespace {

constexpr unsigned kFullMask = 0xffffffffu;
constexpr int kWarp = 32;
constexpr int kRowsPerBlock = 8;    // warp-per-row kernel: 8 rows per 256-thread block
constexpr int kBlockThreads = 256;  // block-per-row kernel
constexpr int kUnroll = 4;

__device__ __forceinline__ float warp_max(float v) {
#pragma unroll
    for (int offset = kWarp / 2; offset > 0; offset >>= 1)
        v = fmaxf(v, __shfl_down_sync(kFullMask, v, offset));
    return v;
}

__device__ __forceinline__ float max4(const float4 v) { return fmaxf(fmaxf(v.x, v.y), fmaxf(v.z, v.w)); }

// One warp per row. VEC: N % 4 == 0 and x 16-byte aligned.
template <bool VEC>
__global__ void __launch_bounds__(kRowsPerBlock * kWarp)
row_max_warp(const float* __restrict__ x, float* __restrict__ out, int M, int N) {
    const int lane = threadIdx.x % kWarp;
    const int row = blockIdx.x * kRowsPerBlock + threadIdx.x / kWarp;
    if (row >= M) return;  // the whole warp leaves together
    const float* __restrict__ xr = x + static_cast<size_t>(row) * N;
    float best = -INFINITY;
    if constexpr (VEC) {
        const float4* __restrict__ x4 = reinterpret_cast<const float4*>(xr);
        for (int i = lane; i < N / 4; i += kWarp) best = fmaxf(best, max4(__ldg(&x4[i])));
    } else {
        for (int i = lane; i < N; i += kWarp) best = fmaxf(best, __ldg(&xr[i]));
    }
    best = warp_max(best);
    if (lane == 0) out[row] = best;
}

// One block per row. VEC: N % 4 == 0 and x 16-byte aligned.
template <bool VEC>
__global__ void __launch_bounds__(kBlockThreads)
row_max_block(const float* __restrict__ x, float* __restrict__ out, int M, int N) {
    constexpr int kWarps = kBlockThreads / kWarp;
    __shared__ float warp_best[kWarps];
    const int row = blockIdx.x;
    const float* __restrict__ xr = x + static_cast<size_t>(row) * N;
    float best0 = -INFINITY, best1 = -INFINITY;
    if constexpr (VEC) {
        const float4* __restrict__ x4 = reinterpret_cast<const float4*>(xr);
        const int n4 = N / 4;
        int i = threadIdx.x;
        for (; i + (kUnroll - 1) * kBlockThreads < n4; i += kUnroll * kBlockThreads) {
            float4 v[kUnroll];
#pragma unroll
            for (int u = 0; u < kUnroll; ++u) v[u] = __ldg(&x4[i + u * kBlockThreads]);
#pragma unroll
            for (int u = 0; u < kUnroll; u += 2) {
                best0 = fmaxf(best0, max4(v[u]));
                best1 = fmaxf(best1, max4(v[u + 1]));
            }
        }
        for (; i < n4; i += kBlockThreads) best0 = fmaxf(best0, max4(__ldg(&x4[i])));
    } else {
        int i = threadIdx.x;
        for (; i + (kUnroll - 1) * kBlockThreads < N; i += kUnroll * kBlockThreads) {
            float v[kUnroll];
#pragma unroll
            for (int u = 0; u < kUnroll; ++u) v[u] = __ldg(&xr[i + u * kBlockThreads]);
#pragma unroll
            for (int u = 0; u < kUnroll; u += 2) {
                best0 = fmaxf(best0, v[u]);
                best1 = fmaxf(best1, v[u + 1]);
            }
        }
        for (; i < N; i += kBlockThreads) best0 = fmaxf(best0, __ldg(&xr[i]));
    }
    float best = warp_max(fmaxf(best0, best1));
    const int lane = threadIdx.x % kWarp;
    const int warp = threadIdx.x / kWarp;
    if (lane == 0) warp_best[warp] = best;
    __syncthreads();
    if (warp == 0) {
        best = lane < kWarps ? warp_best[lane] : -INFINITY;
        best = warp_max(best);
        if (lane == 0) out[row] = best;
    }
}

}  // namespace

extern "C" void launch(const float* x, float* out, int M, int N, cudaStream_t stream) {
    const bool vec = N % 4 == 0 && (reinterpret_cast<uintptr_t>(x) & 15u) == 0;
    if (N <= 1024) {
        const int blocks = (M + kRowsPerBlock - 1) / kRowsPerBlock;
        if (vec)
            row_max_warp<true><<<blocks, kRowsPerBlock * kWarp, 0, stream>>>(x, out, M, N);
        else
            row_max_warp<false><<<blocks, kRowsPerBlock * kWarp, 0, stream>>>(x, out, M, N);
    } else if (vec) {
        row_max_block<true><<<M, kBlockThreads, 0, stream>>>(x, out, M, N);
    } else {
        row_max_block<false><<<M, kBlockThreads, 0, stream>>>(x, out, M, N);
    }
}
