// rotary, naive: one thread per output element; each reads its own and its partner element.
#include <cuda_runtime.h>
#include <cuda_fp16.h>

__global__ void __launch_bounds__(256) rotary_naive(const __half* __restrict__  x, const float* __restrict__  cos, const float* __restrict__  sin, __half* __restrict__  out, int T, int H, int D) {
    // KLineage vectorize: the row in 16-byte packs of 8 when every packed pointer is aligned,
    // partitioned among the threads like the elements were; the elements after the last pack run scalar.
    if (((reinterpret_cast<unsigned long long>(out)) % 16u) == 0) {
        for (long long kl_first = static_cast<long long>(((size_t)blockIdx.x * blockDim.x + threadIdx.x)) * 8; kl_first + 7 < ((size_t)T * H * D); kl_first += static_cast<long long>((gridDim.x * blockDim.x)) * 8) {
            uint4 kl_out;
            __half* kl_out_lane = reinterpret_cast<__half*>(&kl_out);
            #pragma unroll
            for (int kl_k = 0; kl_k < 8; ++kl_k) {
                const size_t i = static_cast<size_t>(kl_first + kl_k);
                int half = D / 2;
                int d = (int)(i % D);
                size_t t = i / ((size_t)H * D);
                int f = d < half ? d : d - half;
                float c = __ldg(&cos[t * half + f]);
                float s = __ldg(&sin[t * half + f]);
                float self = __half2float(__ldg(&x[i]));
                float r;
                if (d < half) {
                    r = self * c - __half2float(__ldg(&x[i + half])) * s;
                } else {
                    r = self * c + __half2float(__ldg(&x[i - half])) * s;
                }
                kl_out_lane[kl_k] = __float2half(r);
            }
            *reinterpret_cast<uint4*>(out + kl_first) = kl_out;
        }
        for (size_t i = ((size_t)T * H * D) / 8 * 8 + ((size_t)blockIdx.x * blockDim.x + threadIdx.x); i < (size_t)T * H * D; i += gridDim.x * blockDim.x) {
            int half = D / 2;
        int d = (int)(i % D);
        size_t t = i / ((size_t)H * D);
        int f = d < half ? d : d - half;
        float c = __ldg(&cos[t * half + f]);
        float s = __ldg(&sin[t * half + f]);
        float self = __half2float(__ldg(&x[i]));
        float r;
        if (d < half) {
            r = self * c - __half2float(__ldg(&x[i + half])) * s;
        } else {
            r = self * c + __half2float(__ldg(&x[i - half])) * s;
        }
        out[i] = __float2half(r);
        }
    } else {
        for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < (size_t)T * H * D; i += gridDim.x * blockDim.x) {
            int half = D / 2;
        int d = (int)(i % D);
        size_t t = i / ((size_t)H * D);
        int f = d < half ? d : d - half;
        float c = __ldg(&cos[t * half + f]);
        float s = __ldg(&sin[t * half + f]);
        float self = __half2float(__ldg(&x[i]));
        float r;
        if (d < half) {
            r = self * c - __half2float(__ldg(&x[i + half])) * s;
        } else {
            r = self * c + __half2float(__ldg(&x[i - half])) * s;
        }
        out[i] = __float2half(r);
        }
    }
}

extern "C" void launch(const __half* x, const float* cos, const float* sin, __half* out, int T, int H, int D,
                       cudaStream_t stream) {
    constexpr int threads = 256;
    size_t total = (size_t)T * H * D;
    rotary_naive<<<(((unsigned)((total + threads - 1) / threads)) < (132 * 8) ? ((unsigned)((total + threads - 1) / threads)) : (132 * 8)), threads, 0, stream>>>(x, cos, sin, out, T, H, D);
}
