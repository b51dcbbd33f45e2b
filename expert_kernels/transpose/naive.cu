// transpose, naive: one thread per output element (linear index over y), reading x with a
// stride of N.
#include <cuda_runtime.h>

__global__ void transpose_naive(const float* x, float* y, int M, int N) {
    size_t idx = (size_t)blockIdx.x * blockDim.x + threadIdx.x;  // element of y
    if (idx >= (size_t)M * N) return;
    size_t j = idx / M;  // row of y = column of x
    size_t i = idx % M;  // column of y = row of x
    y[idx] = x[i * N + j];
}

extern "C" void launch(const float* x, float* y, int M, int N, cudaStream_t stream) {
    size_t total = (size_t)M * N;
    transpose_naive<<<(unsigned)((total + 255) / 256), 256, 0, stream>>>(x, y, M, N);
}
