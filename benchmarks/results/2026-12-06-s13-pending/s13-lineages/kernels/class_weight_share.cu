// class_weight_share, naive: one thread per label adds its weight into the global sums with an
// atomic; then one thread adds up the sums and divides each by the total.
#include <cuda_runtime.h>

constexpr int NUM_CLASSES = 1000;

__global__ void __launch_bounds__(256) class_weight_sum_naive(const int* __restrict__  labels, const float* __restrict__  weights, float* __restrict__  out, int n) {
    __shared__ float out_priv[1000];
    for (int bin = threadIdx.x; bin < 1000; bin += blockDim.x) out_priv[bin] = 0.0f;
    __syncthreads();
    // KLineage vectorize: the row in 16-byte packs of 4 when every packed pointer is aligned,
    // partitioned among the threads like the elements were; the elements after the last pack run scalar.
    if (((reinterpret_cast<unsigned long long>(labels) | reinterpret_cast<unsigned long long>(weights)) % 16u) == 0) {
        for (long long kl_first = static_cast<long long>((blockIdx.x * blockDim.x + threadIdx.x)) * 4; kl_first + 3 < n; kl_first += static_cast<long long>((gridDim.x * blockDim.x)) * 4) {
            const uint4 kl_labels = *reinterpret_cast<const uint4*>(labels + kl_first);
            const int* kl_labels_lane = reinterpret_cast<const int*>(&kl_labels);
            const float4 kl_weights = *reinterpret_cast<const float4*>(weights + kl_first);
            const float* kl_weights_lane = reinterpret_cast<const float*>(&kl_weights);
            #pragma unroll
            for (int kl_k = 0; kl_k < 4; ++kl_k) {
                int c = kl_labels_lane[kl_k];
                atomicAdd(&out_priv[c], kl_weights_lane[kl_k]);
            }
        }
        for (int i = n / 4 * 4 + (blockIdx.x * blockDim.x + threadIdx.x); i < n; i += gridDim.x * blockDim.x) {
            int c = __ldg(&labels[i]);
        atomicAdd(&out_priv[c], __ldg(&weights[i]));
        }
    } else {
        for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
            int c = __ldg(&labels[i]);
        atomicAdd(&out_priv[c], __ldg(&weights[i]));
        }
    }
    __syncthreads();
    for (int bin = threadIdx.x; bin < 1000; bin += blockDim.x) {
        const float bin_value = out_priv[bin];
        if (bin_value != 0.0f) atomicAdd(&out[bin], bin_value);
    }
}

__global__ void __launch_bounds__(1) class_share_naive(float* __restrict__  out) {
    float total = 0.0f;
    // KLineage vectorize: the row in 16-byte packs of 4 when every packed pointer is aligned,
    // partitioned among the threads like the elements were; the elements after the last pack run scalar.
    if (((reinterpret_cast<unsigned long long>(out)) % 16u) == 0) {
        for (long long kl_first = 0; kl_first + 3 < NUM_CLASSES; kl_first += 4) {
            const float4 kl_out = *reinterpret_cast<const float4*>(out + kl_first);
            const float* kl_out_lane = reinterpret_cast<const float*>(&kl_out);
            #pragma unroll
            for (int kl_k = 0; kl_k < 4; ++kl_k) {
                total += kl_out_lane[kl_k];
            }
        }
        for (int c = NUM_CLASSES / 4 * 4; c < NUM_CLASSES; ++c) total += out[c];
    } else {
        for (int c = 0; c < NUM_CLASSES; ++c) total += out[c];
    }
    // KLineage vectorize: the row in 16-byte packs of 4 when every packed pointer is aligned,
    // partitioned among the threads like the elements were; the elements after the last pack run scalar.
    if (((reinterpret_cast<unsigned long long>(out)) % 16u) == 0) {
        const float inv_total = __fdividef(1.0f, total);
        for (long long kl_first1 = 0; kl_first1 + 3 < NUM_CLASSES; kl_first1 += 4) {
            float4 kl_out1 = *reinterpret_cast<const float4*>(out + kl_first1);
            float* kl_out_lane1 = reinterpret_cast<float*>(&kl_out1);
            #pragma unroll
            for (int kl_k1 = 0; kl_k1 < 4; ++kl_k1) {
                kl_out_lane1[kl_k1] = kl_out_lane1[kl_k1] * inv_total;
            }
            *reinterpret_cast<float4*>(out + kl_first1) = kl_out1;
        }
        const float inv_total1 = __fdividef(1.0f, total);
        for (int c = NUM_CLASSES / 4 * 4; c < NUM_CLASSES; ++c) out[c] = out[c] * inv_total1;
    } else {
        const float inv_total2 = __fdividef(1.0f, total);
        for (int c = 0; c < NUM_CLASSES; ++c) out[c] = out[c] * inv_total2;
    }
}

extern "C" void launch(const int* labels, const float* weights, float* out, int N, cudaStream_t stream) {
    cudaMemsetAsync(out, 0, NUM_CLASSES * sizeof(float), stream);
    constexpr int threads = 256;
    class_weight_sum_naive<<<(((N + threads - 1) / threads) < (132 * 8) ? ((N + threads - 1) / threads) : (132 * 8)), threads, 0, stream>>>(labels, weights, out, N);
    class_share_naive<<<1, 1, 0, stream>>>(out);
}
