// gelu_bias, naive: one thread per output element, fp32 math, exact erf GELU.
#include <cuda_runtime.h>
#include <cuda_fp16.h>
#include <math.h>

__global__ void gelu_bias_naive(const __half* x, const __half* bias, __half* y, int M, int N) {
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    size_t total = (size_t)M * N;
    if (i >= total) return;
    float v = __half2float(x[i]) + __half2float(bias[i % N]);
    float g = 0.5f * v * (1.0f + erff(v * 0.70710678118654752f));
    y[i] = __float2half(g);
}

extern "C" void launch(const __half* x, const __half* bias, __half* y, int M, int N, cudaStream_t stream) {
    const int threads = 256;
    size_t total = (size_t)M * N;
    unsigned blocks = (unsigned)((total + threads - 1) / threads);
    gelu_bias_naive<<<blocks, threads, 0, stream>>>(x, bias, y, M, N);
}
