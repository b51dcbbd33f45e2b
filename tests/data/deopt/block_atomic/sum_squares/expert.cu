// out = sum x^2: grid-stride partials, a block reduction (shuffles + shared memory), then one
// atomicAdd per block.
#include <cuda_runtime.h>

__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
    for (int off = 16; off > 0; off >>= 1) v += __shfl_down_sync(0xffffffffu, v, off);
    return v;
}

// Sum over a 1-D block; valid in thread 0.
__device__ float block_sum(float v) {
    __shared__ float warp_part[32];
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    v = warp_sum(v);
    if (lane == 0) warp_part[warp] = v;
    __syncthreads();
    v = 0.f;
    if (warp == 0) {
        v = lane < (int)(blockDim.x >> 5) ? warp_part[lane] : 0.f;
        v = warp_sum(v);
    }
    return v;
}

__global__ void zero_out(float* out) { out[0] = 0.f; }

__global__ void sum_squares(const float* __restrict__ x, float* __restrict__ out, int n) {
    float acc = 0.f;
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) acc += x[i] * x[i];
    const float total = block_sum(acc);
    if (threadIdx.x == 0) atomicAdd(out, total);
}

extern "C" void launch(const float* x, float* out, int n, cudaStream_t stream) {
    zero_out<<<1, 1, 0, stream>>>(out);
    int grid = (n + 127) / 128;
    grid = grid > 6 ? 6 : grid;
    sum_squares<<<grid, 128, 0, stream>>>(x, out, n);
}
