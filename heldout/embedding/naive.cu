// embedding, naive: one thread per output element; each looks up its token's row.
#include <cuda_runtime.h>
#include <cuda_bf16.h>

__global__ void embedding_gather_naive(const __nv_bfloat16* table, const long long* ids, __nv_bfloat16* out,
                                       int V, int D, int T) {
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= (size_t)T * D) return;
    size_t t = i / D;
    size_t d = i % D;
    out[i] = table[(size_t)ids[t] * D + d];
}

extern "C" void launch(const __nv_bfloat16* table, const long long* ids, __nv_bfloat16* out, int V, int D, int T,
                       cudaStream_t stream) {
    const int threads = 256;
    size_t total = (size_t)T * D;
    embedding_gather_naive<<<(unsigned)((total + threads - 1) / threads), threads, 0, stream>>>(table, ids, out, V, D, T);
}
