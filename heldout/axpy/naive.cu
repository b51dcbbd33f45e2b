// axpy, naive: one thread per element.
#include <cuda_runtime.h>

__global__ void axpy_naive(const float* x, const float* y, float* z, int N, float alpha) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < N) z[i] = alpha * x[i] + y[i];
}

extern "C" void launch(const float* x, const float* y, float* z, int N, float alpha, cudaStream_t stream) {
    const int threads = 256;
    axpy_naive<<<(N + threads - 1) / threads, threads, 0, stream>>>(x, y, z, N, alpha);
}
