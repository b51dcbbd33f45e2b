// embedding, naive: one thread per output element; each looks up its token's row.
#include <cuda_runtime.h>
#include <cuda_bf16.h>

__global__ void __launch_bounds__(256) embedding_gather_naive(const __nv_bfloat16* __restrict__  table, const long long* __restrict__  ids, __nv_bfloat16* __restrict__  out,
                                       int V, int D, int T) {
    // KLineage vectorize: the row in 16-byte packs of 8 when every packed pointer is aligned,
    // partitioned among the threads like the elements were; the elements after the last pack run scalar.
    if (((reinterpret_cast<unsigned long long>(out)) % 16u) == 0) {
        for (long long kl_first = static_cast<long long>(((size_t)blockIdx.x * blockDim.x + threadIdx.x)) * 8; kl_first + 7 < ((size_t)T * D); kl_first += static_cast<long long>((gridDim.x * blockDim.x)) * 8) {
            uint4 kl_out;
            __nv_bfloat16* kl_out_lane = reinterpret_cast<__nv_bfloat16*>(&kl_out);
            #pragma unroll
            for (int kl_k = 0; kl_k < 8; ++kl_k) {
                const size_t i = static_cast<size_t>(kl_first + kl_k);
                size_t t = i / D;
                size_t d = i % D;
                kl_out_lane[kl_k] = __ldg(&table[(size_t)ids[t] * D + d]);
            }
            *reinterpret_cast<uint4*>(out + kl_first) = kl_out;
        }
        for (size_t i = ((size_t)T * D) / 8 * 8 + ((size_t)blockIdx.x * blockDim.x + threadIdx.x); i < (size_t)T * D; i += gridDim.x * blockDim.x) {
            size_t t = i / D;
        size_t d = i % D;
        out[i] = __ldg(&table[(size_t)ids[t] * D + d]);
        }
    } else {
        for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < (size_t)T * D; i += gridDim.x * blockDim.x) {
            size_t t = i / D;
        size_t d = i % D;
        out[i] = __ldg(&table[(size_t)ids[t] * D + d]);
        }
    }
}

extern "C" void launch(const __nv_bfloat16* table, const long long* ids, __nv_bfloat16* out, int V, int D, int T,
                       cudaStream_t stream) {
    constexpr int threads = 256;
    size_t total = (size_t)T * D;
    embedding_gather_naive<<<(((unsigned)((total + threads - 1) / threads)) < (132 * 8) ? ((unsigned)((total + threads - 1) / threads)) : (132 * 8)), threads, 0, stream>>>(table, ids, out, V, D, T);
}
