// axpy, naive: one thread per element.
#include <cuda_runtime.h>

__global__ void __launch_bounds__(256) axpy_naive(const float* __restrict__  x, const float* __restrict__  y, float* __restrict__  z, int N, float alpha) {
    const int N4 = N / 4;
    const float4* x4 = reinterpret_cast<const float4*>(x);
    const float4* y4 = reinterpret_cast<const float4*>(y);
    float4* z4 = reinterpret_cast<float4*>(z);
    #pragma unroll
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < N4; i += gridDim.x * blockDim.x) {
        const float4 xv = __ldg(&x4[i]);
        const float4 yv = __ldg(&y4[i]);
        z4[i] = make_float4(alpha * xv.x + yv.x, alpha * xv.y + yv.y, alpha * xv.z + yv.z, alpha * xv.w + yv.w);
    }
    for (int i = 4 * N4 + (blockIdx.x * blockDim.x + threadIdx.x); i < N; i += gridDim.x * blockDim.x) z[i] = alpha * __ldg(&x[i]) + __ldg(&y[i]);
}

extern "C" void launch(const float* x, const float* y, float* z, int N, float alpha, cudaStream_t stream) {
    constexpr int threads = 256;
    axpy_naive<<<(((N + threads - 1) / threads) < (132 * 8) ? ((N + threads - 1) / threads) : (132 * 8)), threads, 0, stream>>>(x, y, z, N, alpha);
}
