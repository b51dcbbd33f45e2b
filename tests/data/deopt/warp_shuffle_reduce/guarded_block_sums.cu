// Written for KLineage's tests: per-chunk sums, a rolled warp reduction whose levels are guarded by
// a template width (the form a template-unrolled tree takes once rolled back into a loop).
#include <cuda_runtime.h>

#define CHUNK 256

template <unsigned int width>
__device__ __forceinline__ float lanes_sum(float acc) {
    for (int off = 16; off > 0; off >>= 1) {
        if (width >= 2 * off) acc += __shfl_down_sync(0xffffffff, acc, off);
    }
    return acc;
}

template <unsigned int threads>
__global__ void chunk_sums(const float* src, float* dst) {
    __shared__ float per_warp[32];
    unsigned int t = threadIdx.x;
    const unsigned int warp = t >> 5;
    float acc = src[blockIdx.x * CHUNK + t] + src[blockIdx.x * CHUNK + t + threads];
    acc = lanes_sum<32>(acc);
    if (t % 32 == 0) per_warp[warp] = acc;
    __syncthreads();
    acc = t < threads / 32 ? per_warp[t] : 0.0f;
    if (warp == 0) acc = lanes_sum<threads / 32>(acc);
    if (t == 0) dst[blockIdx.x] = acc;
}

extern "C" void launch(const float* x, float* out, int N, int B, cudaStream_t stream) {
    chunk_sums<128><<<B, 128, 0, stream>>>(x, out);
}
