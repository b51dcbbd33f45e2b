// Written for KLineage's tests: per-block sums with a hand-unrolled warp reduction.
#include <cuda_runtime.h>

constexpr int kBlocks = 8;
constexpr int kThreads = 128;

template <unsigned int kWidth>
__device__ __forceinline__ float fold(float v) {
    if (kWidth >= 32) v += __shfl_down_sync(0xffffffffu, v, 16);
    if (kWidth >= 16) v += __shfl_down_sync(0xffffffffu, v, 8);
    if (kWidth >= 8) v += __shfl_down_sync(0xffffffffu, v, 4);
    if (kWidth >= 4) v += __shfl_down_sync(0xffffffffu, v, 2);
    if (kWidth >= 2) v += __shfl_down_sync(0xffffffffu, v, 1);
    return v;
}

__global__ void partial_sums(const float* x, float* partial, int n) {
    __shared__ float warp_sums[kThreads / 32];
    float acc = 0.0f;
    for (int i = blockIdx.x * kThreads + threadIdx.x; i < n; i += kBlocks * kThreads) acc += x[i];
    acc = fold<32>(acc);
    if (threadIdx.x % 32 == 0) warp_sums[threadIdx.x / 32] = acc;
    __syncthreads();
    if (threadIdx.x >= 32) return;
    acc = threadIdx.x < kThreads / 32 ? warp_sums[threadIdx.x] : 0.0f;
    acc = fold<kThreads / 32>(acc);
    if (threadIdx.x == 0) partial[blockIdx.x] = acc;
}

__global__ void finish(const float* partial, float* out) {
    float s = 0.0f;
    for (int k = 0; k < kBlocks; ++k) s += partial[k];
    out[0] = s;
}

extern "C" void launch(const float* x, float* out, float* partial, int n, cudaStream_t stream) {
    partial_sums<<<kBlocks, kThreads, 0, stream>>>(x, partial, n);
    finish<<<1, 1, 0, stream>>>(partial, out);
}
