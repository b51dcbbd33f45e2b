// One thread per row, a straight loop over global memory.
#include <cuda_runtime.h>

__global__ void row_sum_naive(const float* x, float* y, int M, int N) {
    int row = blockIdx.x * blockDim.x + threadIdx.x;
    if (row < M) {
        float acc = 0.0f;
        for (int j = 0; j < N; ++j) acc += x[(size_t)row * N + j];
        y[row] = acc;
    }
}

extern "C" void launch(const float* x, float* y, int M, int N, cudaStream_t stream) {
    int block = 128;
    row_sum_naive<<<(M + block - 1) / block, block, 0, stream>>>(x, y, M, N);
}
