// One block per row: coalesced strided loads, warp-shuffle reduction, then a shared-memory
// combine of the per-warp partials.
#include <cuda_runtime.h>

template <int BLOCK>
__global__ void __launch_bounds__(BLOCK) row_sum_block(const float* __restrict__ x, float* __restrict__ y, int N) {
    __shared__ float partial[BLOCK / 32];
    const float* row = x + (size_t)blockIdx.x * N;
    float acc = 0.0f;
    for (int j = threadIdx.x; j < N; j += BLOCK) acc += __ldg(row + j);
#pragma unroll
    for (int off = 16; off > 0; off >>= 1) acc += __shfl_xor_sync(0xffffffffu, acc, off);
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    if (lane == 0) partial[warp] = acc;
    __syncthreads();
    if (warp == 0) {
        acc = lane < BLOCK / 32 ? partial[lane] : 0.0f;
#pragma unroll
        for (int off = 16; off > 0; off >>= 1) acc += __shfl_xor_sync(0xffffffffu, acc, off);
        if (lane == 0) y[blockIdx.x] = acc;
    }
}

extern "C" void launch(const float* x, float* y, int M, int N, cudaStream_t stream) {
    row_sum_block<256><<<M, 256, 0, stream>>>(x, y, N);
}
