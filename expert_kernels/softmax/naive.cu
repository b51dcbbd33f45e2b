// softmax, naive: one thread per row, three straight loops over global memory.
#include <cuda_runtime.h>
#include <math.h>

__global__ void softmax_naive(const float* x, float* y, int M, int N) {
    int row = blockIdx.x * blockDim.x + threadIdx.x;
    if (row >= M) return;
    size_t base = (size_t)row * N;
    float mx = -INFINITY;
    for (int j = 0; j < N; ++j) mx = fmaxf(mx, x[base + j]);
    float sum = 0.0f;
    for (int j = 0; j < N; ++j) sum += expf(x[base + j] - mx);
    for (int j = 0; j < N; ++j) {
        float e = expf(x[base + j] - mx);
        y[base + j] = e / sum;
    }
}

extern "C" void launch(const float* x, float* y, int M, int N, cudaStream_t stream) {
    softmax_naive<<<(M + 255) / 256, 256, 0, stream>>>(x, y, M, N);
}
