// Written for KLineage's tests: sums of 256-element chunks, reduced in two levels (each warp with
// shuffles, one shared slot per warp, the first warp folds the slots); only thread 0 stores.
#include <cuda_runtime.h>

__device__ __forceinline__ float lane_sum(float x) {
    x += __shfl_down_sync(0xffffffffu, x, 16);
    x += __shfl_down_sync(0xffffffffu, x, 8);
    x += __shfl_down_sync(0xffffffffu, x, 4);
    x += __shfl_down_sync(0xffffffffu, x, 2);
    x += __shfl_down_sync(0xffffffffu, x, 1);
    return x;
}

__global__ void chunk_sum(const float* __restrict__ src, float* __restrict__ dst) {
    __shared__ float per_warp[32];
    const unsigned lane = threadIdx.x & 31;
    const unsigned wid = threadIdx.x >> 5;
    float x = src[blockIdx.x * blockDim.x + threadIdx.x];
    x = lane_sum(x);
    if (lane == 0) per_warp[wid] = x;
    __syncthreads();
    x = (threadIdx.x < blockDim.x / 32) ? per_warp[lane] : 0.0f;
    if (wid == 0) x = lane_sum(x);
    if (threadIdx.x == 0) dst[blockIdx.x] = x;
}

extern "C" void launch(const float* x, float* out, int N, int B, cudaStream_t stream) {
    chunk_sum<<<B, 256, 0, stream>>>(x, out);
}
