// add_rmsnorm, naive: one thread per row; the sum is written, read back for the norm, then scaled.
#include <cuda_runtime.h>
#include <cuda_fp16.h>
#include <math.h>

__global__ void add_rmsnorm_naive(const __half* x, const __half* residual, const __half* weight, __half* h,
                                  __half* y, int M, int N, float eps) {
    int row = blockIdx.x * blockDim.x + threadIdx.x;
    if (row >= M) return;
    size_t base = (size_t)row * N;
    for (int j = 0; j < N; ++j)
        h[base + j] = __float2half(__half2float(x[base + j]) + __half2float(residual[base + j]));
    float ss = 0.0f;
    for (int j = 0; j < N; ++j) {
        float v = __half2float(h[base + j]);
        ss += v * v;
    }
    float inv = rsqrtf(ss / N + eps);
    for (int j = 0; j < N; ++j)
        y[base + j] = __float2half(__half2float(h[base + j]) * inv * __half2float(weight[j]));
}

extern "C" void launch(const __half* x, const __half* residual, const __half* weight, __half* h, __half* y,
                       int M, int N, float eps, cudaStream_t stream) {
    const int threads = 128;
    add_rmsnorm_naive<<<(M + threads - 1) / threads, threads, 0, stream>>>(x, residual, weight, h, y, M, N, eps);
}
