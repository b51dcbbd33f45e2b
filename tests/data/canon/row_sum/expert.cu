// Written for KLineage's tests: one thread per row, the row guard around the kernel's body.
#include <cuda_runtime.h>

const int ROW_THREADS = 128;

__global__ void row_sum(const float* x, float* y, int M, int N) {
    int row = threadIdx.x + blockDim.x * blockIdx.x;
    if (row < M) {
        float acc = 0.0f;
        for (int j = 0; j < N; ++j) acc += x[row * N + j];
        y[row] = acc;
    }
}

extern "C" void launch(const float* x, float* y, int M, int N, cudaStream_t stream) {
    row_sum<<<(M + ROW_THREADS - 1) / ROW_THREADS, ROW_THREADS, 0, stream>>>(x, y, M, N);
}
