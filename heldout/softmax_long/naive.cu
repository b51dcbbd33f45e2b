// softmax_long, naive: one thread per row; max, normalizer, and output passes over global memory.
#include <cuda_runtime.h>
#include <math.h>

__global__ void softmax_long_naive(const float* x, float* y, int M, int N) {
    int row = blockIdx.x * blockDim.x + threadIdx.x;
    if (row >= M) return;
    size_t base = (size_t)row * N;
    float mx = -INFINITY;
    for (int j = 0; j < N; ++j) mx = fmaxf(mx, x[base + j]);
    float denom = 0.0f;
    for (int j = 0; j < N; ++j) denom += expf(x[base + j] - mx);
    float inv = 1.0f / denom;
    for (int j = 0; j < N; ++j) y[base + j] = expf(x[base + j] - mx) * inv;
}

extern "C" void launch(const float* x, float* y, int M, int N, cudaStream_t stream) {
    const int threads = 64;
    softmax_long_naive<<<(M + threads - 1) / threads, threads, 0, stream>>>(x, y, M, N);
}
