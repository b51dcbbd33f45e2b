// y = 1.5 x - 0.25, each thread handles ITEMS elements one block-width apart (coalesced per item).
#include <cuda_runtime.h>

template <int ITEMS>
__global__ void scale_shift_coarse(const float* __restrict__ x, float* __restrict__ y, int n) {
    const int base = blockIdx.x * (blockDim.x * ITEMS) + threadIdx.x;
#pragma unroll
    for (int k = 0; k < ITEMS; ++k) {
        const int idx = base + k * blockDim.x;
        if (idx < n) y[idx] = 1.5f * x[idx] - 0.25f;
    }
}

extern "C" void launch(const float* x, float* y, int n, cudaStream_t stream) {
    constexpr int kItems = 4;
    const int block = 128;
    const int grid = (n + block * kItems - 1) / (block * kItems);
    scale_shift_coarse<kItems><<<grid, block, 0, stream>>>(x, y, n);
}
