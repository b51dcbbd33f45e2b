// reduce_sum_rows, naive: one thread per row, a straight loop over global memory.
#include <cuda_runtime.h>

__global__ void row_sum_naive(const float* x, float* out, int M, int N) {
    int row = blockIdx.x * blockDim.x + threadIdx.x;
    if (row >= M) return;
    double acc = 0.0;
    for (int j = 0; j < N; ++j) acc += x[(size_t)row * N + j];
    out[row] = (float)acc;
}

extern "C" void launch(const float* x, float* out, int M, int N, cudaStream_t stream) {
    row_sum_naive<<<(M + 255) / 256, 256, 0, stream>>>(x, out, M, N);
}
