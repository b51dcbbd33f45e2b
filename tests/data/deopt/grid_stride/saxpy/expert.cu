// z = a * x + y with a grid-stride loop; the grid is capped at a few waves of the GPU.
#include <cuda_runtime.h>

__global__ void saxpy_grid_stride(const float* __restrict__ x, const float* __restrict__ y,
                                  float* __restrict__ z, float a, int n) {
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
        z[i] = a * x[i] + y[i];
    }
}

extern "C" void launch(const float* x, const float* y, float* z, int n, cudaStream_t stream) {
    const int block = 128;
    int grid = (n + block - 1) / block;
    if (grid > 4) grid = 4;  // small cap so the emulator's shapes really stride
    saxpy_grid_stride<<<grid, block, 0, stream>>>(x, y, z, 2.5f, n);
}
