// y = 3 a + b, one element per thread (the forward step's starting point).
#include <cuda_runtime.h>

__global__ void saxpy(const float* __restrict__ a, const float* __restrict__ b, float* __restrict__ y, int n) {
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) y[i] = 3.0f * a[i] + b[i];
}

extern "C" void launch(const float* a, const float* b, float* y, int n, cudaStream_t stream) {
    saxpy<<<(n + 255) / 256, 256, 0, stream>>>(a, b, y, n);
}
