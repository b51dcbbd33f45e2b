// swiglu, naive: one thread per output element, fp32 math.
#include <cuda_runtime.h>
#include <cuda_bf16.h>
#include <math.h>

__global__ void __launch_bounds__(256) swiglu_naive(const __nv_bfloat16* __restrict__  gate, const __nv_bfloat16* __restrict__  up, __nv_bfloat16* __restrict__  y, int M, int N) {
    // KLineage vectorize: the row in 16-byte packs of 8 when every packed pointer is aligned,
    // partitioned among the threads like the elements were; the elements after the last pack run scalar.
    if (((reinterpret_cast<unsigned long long>(gate) | reinterpret_cast<unsigned long long>(up) | reinterpret_cast<unsigned long long>(y)) % 16u) == 0) {
        for (long long kl_first = static_cast<long long>(((size_t)blockIdx.x * blockDim.x + threadIdx.x)) * 8; kl_first + 7 < ((size_t)M * N); kl_first += static_cast<long long>((gridDim.x * blockDim.x)) * 8) {
            const uint4 kl_gate = *reinterpret_cast<const uint4*>(gate + kl_first);
            const __nv_bfloat16* kl_gate_lane = reinterpret_cast<const __nv_bfloat16*>(&kl_gate);
            const uint4 kl_up = *reinterpret_cast<const uint4*>(up + kl_first);
            const __nv_bfloat16* kl_up_lane = reinterpret_cast<const __nv_bfloat16*>(&kl_up);
            uint4 kl_y;
            __nv_bfloat16* kl_y_lane = reinterpret_cast<__nv_bfloat16*>(&kl_y);
            #pragma unroll
            for (int kl_k = 0; kl_k < 8; ++kl_k) {
                float g = __bfloat162float(kl_gate_lane[kl_k]);
                float u = __bfloat162float(kl_up_lane[kl_k]);
                float s = __fdividef(g, 1.0f + __expf(-g));
                kl_y_lane[kl_k] = __float2bfloat16(s * u);
            }
            *reinterpret_cast<uint4*>(y + kl_first) = kl_y;
        }
        for (size_t i = ((size_t)M * N) / 8 * 8 + ((size_t)blockIdx.x * blockDim.x + threadIdx.x); i < (size_t)M * N; i += gridDim.x * blockDim.x) {
            float g = __bfloat162float(__ldg(&gate[i]));
        float u = __bfloat162float(__ldg(&up[i]));
        float s = __fdividef(g, 1.0f + __expf(-g));
        y[i] = __float2bfloat16(s * u);
        }
    } else {
        for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < (size_t)M * N; i += gridDim.x * blockDim.x) {
            float g = __bfloat162float(__ldg(&gate[i]));
        float u = __bfloat162float(__ldg(&up[i]));
        float s = __fdividef(g, 1.0f + __expf(-g));
        y[i] = __float2bfloat16(s * u);
        }
    }
}

extern "C" void launch(const __nv_bfloat16* gate, const __nv_bfloat16* up, __nv_bfloat16* y, int M, int N,
                       cudaStream_t stream) {
    constexpr int threads = 256;
    size_t total = (size_t)M * N;
    swiglu_naive<<<(((unsigned)((total + threads - 1) / threads)) < (132 * 8) ? ((unsigned)((total + threads - 1) / threads)) : (132 * 8)), threads, 0, stream>>>(gate, up, y, M, N);
}
