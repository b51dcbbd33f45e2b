// cumsum, naive: one thread per row, a sequential running sum written element by element.
#include <cuda_runtime.h>

__global__ void cumsum_rows_naive(const float* x, float* y, int M, int N) {
    int row = blockIdx.x * blockDim.x + threadIdx.x;
    if (row >= M) return;
    size_t base = (size_t)row * N;
    float run = 0.0f;
    for (int j = 0; j < N; ++j) {
        run += x[base + j];
        y[base + j] = run;
    }
}

extern "C" void launch(const float* x, float* y, int M, int N, cudaStream_t stream) {
    const int threads = 128;
    cumsum_rows_naive<<<(M + threads - 1) / threads, threads, 0, stream>>>(x, y, M, N);
}
