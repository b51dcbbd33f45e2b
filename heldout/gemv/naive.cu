// gemv, naive: one thread per output row, a sequential dot product over global memory.
#include <cuda_runtime.h>

__global__ void gemv_rows_naive(const float* A, const float* x, float* y, int M, int K) {
    int row = blockIdx.x * blockDim.x + threadIdx.x;
    if (row >= M) return;
    const float* a = A + (size_t)row * K;
    float dot = 0.0f;
    for (int k = 0; k < K; ++k) dot += a[k] * x[k];
    y[row] = dot;
}

extern "C" void launch(const float* A, const float* x, float* y, int M, int K, cudaStream_t stream) {
    const int threads = 128;
    gemv_rows_naive<<<(M + threads - 1) / threads, threads, 0, stream>>>(A, x, y, M, K);
}
