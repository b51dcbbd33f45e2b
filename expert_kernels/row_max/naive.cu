// row_max, naive: one thread per row, a straight loop over global memory.
#include <cuda_runtime.h>
#include <math.h>

__global__ void row_max_naive(const float* x, float* out, int M, int N) {
    int row = blockIdx.x * blockDim.x + threadIdx.x;
    if (row >= M) return;
    float best = -INFINITY;
    for (int j = 0; j < N; ++j) best = fmaxf(best, x[(size_t)row * N + j]);
    out[row] = best;
}

extern "C" void launch(const float* x, float* out, int M, int N, cudaStream_t stream) {
    row_max_naive<<<(M + 255) / 256, 256, 0, stream>>>(x, out, M, N);
}
