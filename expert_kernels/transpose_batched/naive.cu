// transpose_batched, naive: one thread per output element (linear index over y), reading x with a
// stride of N.
#include <cuda_runtime.h>

__global__ void transpose_naive(const float* x, float* y, int B, int M, int N) {
    size_t idx = (size_t)blockIdx.x * blockDim.x + threadIdx.x;  // element of y
    size_t matrix = (size_t)M * N;
    if (idx >= (size_t)B * matrix) return;
    size_t b = idx / matrix;
    size_t r = idx % matrix;
    size_t j = r / M;  // row of y[b] = column of x[b]
    size_t i = r % M;  // column of y[b] = row of x[b]
    y[idx] = x[b * matrix + i * N + j];
}

extern "C" void launch(const float* x, float* y, int B, int M, int N, cudaStream_t stream) {
    size_t total = (size_t)B * M * N;
    transpose_naive<<<(unsigned)((total + 255) / 256), 256, 0, stream>>>(x, y, B, M, N);
}
