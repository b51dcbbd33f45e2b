// gelu_bias, naive: one thread per output element, fp32 math, exact erf GELU.
#include <cuda_runtime.h>
#include <cuda_fp16.h>
#include <math.h>

__global__ void __launch_bounds__(256) gelu_bias_naive(const __half* __restrict__  x, const __half* __restrict__  bias, __half* __restrict__  y, int M, int N) {
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    size_t total = (size_t)M * N;
    // KLineage vectorize: 8 elements per thread in 16-byte packs when every packed pointer
    // is aligned; a scalar tail past the bound; unaligned pointers take the scalar path below.
    if (((reinterpret_cast<unsigned long long>(x) | reinterpret_cast<unsigned long long>(y)) % 16u) == 0) {
        const long long kl_first = static_cast<long long>(i) * 8;
        if (kl_first + 7 < total) {
            const uint4 kl_x = *reinterpret_cast<const uint4*>(x + kl_first);
            const __half* kl_x_lane = reinterpret_cast<const __half*>(&kl_x);
            uint4 kl_y;
            __half* kl_y_lane = reinterpret_cast<__half*>(&kl_y);
            #pragma unroll
            for (int kl_k = 0; kl_k < 8; ++kl_k) {
                const size_t i = static_cast<size_t>(kl_first + kl_k);
                float v = __half2float(kl_x_lane[kl_k]) + __half2float(__ldg(&bias[i % N]));
                float g = 0.5f * v * (1.0f + erff(v * 0.70710678118654752f));
                kl_y_lane[kl_k] = __float2half(g);
            }
            *reinterpret_cast<uint4*>(y + kl_first) = kl_y;
        } else {
            for (int kl_k = 0; kl_k < 8 && kl_first + kl_k < total; ++kl_k) {
                const size_t i = static_cast<size_t>(kl_first + kl_k);
                float v = __half2float(__ldg(&x[i])) + __half2float(__ldg(&bias[i % N]));
                float g = 0.5f * v * (1.0f + erff(v * 0.70710678118654752f));
                y[i] = __float2half(g);
            }
        }
        return;
    }
    if (i >= total) return;
    float v = __half2float(__ldg(&x[i])) + __half2float(__ldg(&bias[i % N]));
    float g = 0.5f * v * (1.0f + erff(v * 0.70710678118654752f));
    y[i] = __float2half(g);
}

extern "C" void launch(const __half* x, const __half* bias, __half* y, int M, int N, cudaStream_t stream) {
    constexpr int threads = 256;
    size_t total = (size_t)M * N;
    unsigned blocks = (unsigned)((total + threads - 1) / threads);
    gelu_bias_naive<<<(((reinterpret_cast<unsigned long long>(x) | reinterpret_cast<unsigned long long>(y)) % 16u) == 0 ? (blocks + 7) / 8 : blocks), threads, 0, stream>>>(x, bias, y, M, N);
}
