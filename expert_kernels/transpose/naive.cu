// transpose, naive: one thread per output element, reading x with a stride of N.
#include <cuda_runtime.h>

__global__ void transpose_naive(const float* x, float* y, int M, int N) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;  // column of y (row of x)
    int j = blockIdx.y * blockDim.y + threadIdx.y;  // row of y (column of x)
    if (i < M && j < N) y[(size_t)j * M + i] = x[(size_t)i * N + j];
}

extern "C" void launch(const float* x, float* y, int M, int N, cudaStream_t stream) {
    dim3 block(16, 16);
    dim3 grid((M + 15) / 16, (N + 15) / 16);
    transpose_naive<<<grid, block, 0, stream>>>(x, y, M, N);
}
