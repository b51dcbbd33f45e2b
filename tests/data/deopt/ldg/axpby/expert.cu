// z = alpha * x + beta * y with read-only loads through the non-coherent cache; a second kernel
// reads through a derived row pointer and a vector view.
#include <cuda_runtime.h>

__global__ void __launch_bounds__(256) axpby(const float* __restrict__ x, const float* __restrict__ y,
                                             float* __restrict__ z, float alpha, float beta, int n) {
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) z[i] = alpha * __ldg(&x[i]) + beta * __ldg(y + i);
}

extern "C" void launch(const float* x, const float* y, float* z, int n, cudaStream_t stream) {
    axpby<<<(n + 255) / 256, 256, 0, stream>>>(x, y, z, 2.0f, -0.5f, n);
}
