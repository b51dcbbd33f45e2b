// y[r] = sum_j (x[r, j] - max_j x[r, j]). Short rows: one warp per row, an xor butterfly max that
// every lane then uses. Long rows: one block per row, an unrolled butterfly max, and a down-shuffle
// sum in a device function that is also called inside `if (warp == 0)`.
#include <cuda_runtime.h>
#include <math.h>

constexpr int kRowsPerBlock = 4;

__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
    for (int off = 16; off > 0; off >>= 1) v += __shfl_down_sync(0xffffffffu, v, off);
    return v;
}

__global__ void centered_sum_warp(const float* __restrict__ x, float* __restrict__ y, int M, int N) {
    const int lane = threadIdx.x & 31;
    const int row = blockIdx.x * kRowsPerBlock + threadIdx.x / 32;
    if (row >= M) return;  // whole warps leave
    const float* xr = x + (size_t)row * N;
    float m = -INFINITY;
    for (int j = lane; j < N; j += 32) m = fmaxf(m, xr[j]);
    for (int off = 16; off > 0; off >>= 1) m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, off));
    float s = 0.f;
    for (int j = lane; j < N; j += 32) s += xr[j] - m;  // every lane needs the row max
    s = warp_sum(s);
    if (lane == 0) y[row] = s;
}

template <int BLOCK>
__global__ void centered_sum_block(const float* __restrict__ x, float* __restrict__ y, int M, int N) {
    __shared__ float part[BLOCK / 32];
    const int lane = threadIdx.x & 31, warp = threadIdx.x / 32;
    const float* xr = x + (size_t)blockIdx.x * N;
    float m = -INFINITY;
    for (int j = threadIdx.x; j < N; j += BLOCK) m = fmaxf(m, xr[j]);
    m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, 16));
    m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, 8));
    m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, 4));
    m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, 2));
    m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, 1));
    if (lane == 0) part[warp] = m;
    __syncthreads();
    m = part[0];
    for (int w = 1; w < BLOCK / 32; ++w) m = fmaxf(m, part[w]);
    __syncthreads();
    float s = 0.f;
    for (int j = threadIdx.x; j < N; j += BLOCK) s += xr[j] - m;
    s = warp_sum(s);
    if (lane == 0) part[warp] = s;
    __syncthreads();
    if (warp == 0) {
        s = lane < BLOCK / 32 ? part[lane] : 0.f;
        s = warp_sum(s);
        if (lane == 0) y[blockIdx.x] = s;
    }
}

extern "C" void launch(const float* x, float* y, int M, int N, cudaStream_t stream) {
    if (N <= 256)
        centered_sum_warp<<<(M + kRowsPerBlock - 1) / kRowsPerBlock, kRowsPerBlock * 32, 0, stream>>>(x, y, M, N);
    else
        centered_sum_block<256><<<M, 256, 0, stream>>>(x, y, M, N);
}
