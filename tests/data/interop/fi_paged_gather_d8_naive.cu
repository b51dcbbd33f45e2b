// One thread per batch element: softmax over its pages' logits, then the weighted sum of keys.
#include <cuda_runtime.h>

__global__ void paged_gather(const float* q, const float* k_cache, const int* kv_indptr, const int* kv_indices,
                             const float* sm_scale, float* out, long long batch_size) {
    long long b = blockIdx.x * (long long)blockDim.x + threadIdx.x;
    if (b >= batch_size) return;
    int start = kv_indptr[b], end = kv_indptr[b + 1];
    float acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    if (start < end) {
        float m = -INFINITY;
        for (int i = start; i < end; ++i) {
            const float* k = k_cache + (long long)kv_indices[i] * 8;
            float s = 0.f;
            for (int d = 0; d < 8; ++d) s += k[d] * q[b * 8 + d];
            m = fmaxf(m, s * sm_scale[0]);
        }
        float z = 0.f;
        for (int i = start; i < end; ++i) {
            const float* k = k_cache + (long long)kv_indices[i] * 8;
            float s = 0.f;
            for (int d = 0; d < 8; ++d) s += k[d] * q[b * 8 + d];
            float w = expf(s * sm_scale[0] - m);
            z += w;
            for (int d = 0; d < 8; ++d) acc[d] += w * k[d];
        }
        for (int d = 0; d < 8; ++d) acc[d] /= z;
    }
    for (int d = 0; d < 8; ++d) out[b * 8 + d] = acc[d];
}

extern "C" void launch(const float* q, const float* k_cache, const int* kv_indptr, const int* kv_indices,
                       const float* sm_scale, float* out, long long batch_size, long long num_pages,
                       long long len_indptr, long long num_kv_indices, cudaStream_t stream) {
    (void)num_pages; (void)len_indptr; (void)num_kv_indices;
    paged_gather<<<(unsigned)((batch_size + 127) / 128), 128, 0, stream>>>(q, k_cache, kv_indptr, kv_indices, sm_scale,
                                                                             out, batch_size);
}
