// softmax_fp16, naive: one thread per row, three straight loops over global memory.
#include <cuda_runtime.h>
#include <cuda_fp16.h>
#include <math.h>

__global__ void softmax_naive(const __half* x, __half* y, int M, int N) {
    int row = blockIdx.x * blockDim.x + threadIdx.x;
    if (row >= M) return;
    size_t base = (size_t)row * N;
    float mx = -INFINITY;
    for (int j = 0; j < N; ++j) mx = fmaxf(mx, __half2float(x[base + j]));
    float sum = 0.0f;
    for (int j = 0; j < N; ++j) sum += expf(__half2float(x[base + j]) - mx);
    for (int j = 0; j < N; ++j) {
        float e = expf(__half2float(x[base + j]) - mx);
        y[base + j] = __float2half(e / sum);
    }
}

extern "C" void launch(const __half* x, __half* y, int M, int N, cudaStream_t stream) {
    softmax_naive<<<(M + 255) / 256, 256, 0, stream>>>(x, y, M, N);
}
