// log_softmax, naive: one thread per row, three straight loops over global memory.
#include <cuda_runtime.h>
#include <math.h>

__global__ void log_softmax_naive(const float* x, float* y, int M, int N) {
    int row = blockIdx.x * blockDim.x + threadIdx.x;
    if (row >= M) return;
    size_t base = (size_t)row * N;
    float mx = -INFINITY;
    for (int j = 0; j < N; ++j) mx = fmaxf(mx, x[base + j]);
    float sum = 0.0f;
    for (int j = 0; j < N; ++j) sum += expf(x[base + j] - mx);
    float lse = mx + logf(sum);
    for (int j = 0; j < N; ++j) y[base + j] = x[base + j] - lse;
}

extern "C" void launch(const float* x, float* y, int M, int N, cudaStream_t stream) {
    log_softmax_naive<<<(M + 255) / 256, 256, 0, stream>>>(x, y, M, N);
}
