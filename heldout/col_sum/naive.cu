// col_sum, naive: one thread per column, a loop down the rows, accumulated in double.
#include <cuda_runtime.h>

__global__ void col_sum_naive(const float* x, float* y, int M, int N) {
    int col = blockIdx.x * blockDim.x + threadIdx.x;
    if (col >= N) return;
    double s = 0.0;
    for (int m = 0; m < M; ++m) s += x[(size_t)m * N + col];
    y[col] = (float)s;
}

extern "C" void launch(const float* x, float* y, int M, int N, cudaStream_t stream) {
    const int threads = 128;
    col_sum_naive<<<(N + threads - 1) / threads, threads, 0, stream>>>(x, y, M, N);
}
