// group_mean, naive: one thread per element adds its value and a one into the global per-group
// sums and counts with atomics; then one thread per group divides its sum by its count.
#include <cuda_runtime.h>

constexpr int NUM_GROUPS = 500;

__global__ void __launch_bounds__(256) group_accumulate_naive(const int* __restrict__  ids, const float* __restrict__  values, float* __restrict__  means, int* __restrict__  counts, int n) {
    __shared__ int counts_priv[500];
    for (int bin_ = threadIdx.x; bin_ < 500; bin_ += blockDim.x) counts_priv[bin_] = 0;
    __syncthreads();
    __shared__ float means_priv[500];
    for (int bin = threadIdx.x; bin < 500; bin += blockDim.x) means_priv[bin] = 0.0f;
    __syncthreads();
    // KLineage vectorize: the row in 16-byte packs of 4 when every packed pointer is aligned,
    // partitioned among the threads like the elements were; the elements after the last pack run scalar.
    if (((reinterpret_cast<unsigned long long>(ids) | reinterpret_cast<unsigned long long>(values)) % 16u) == 0) {
        for (long long kl_first = static_cast<long long>((blockIdx.x * blockDim.x + threadIdx.x)) * 4; kl_first + 3 < n; kl_first += static_cast<long long>((gridDim.x * blockDim.x)) * 4) {
            const uint4 kl_ids = *reinterpret_cast<const uint4*>(ids + kl_first);
            const int* kl_ids_lane = reinterpret_cast<const int*>(&kl_ids);
            const float4 kl_values = *reinterpret_cast<const float4*>(values + kl_first);
            const float* kl_values_lane = reinterpret_cast<const float*>(&kl_values);
            #pragma unroll
            for (int kl_k = 0; kl_k < 4; ++kl_k) {
                int g = kl_ids_lane[kl_k];
                atomicAdd(&means_priv[g], kl_values_lane[kl_k]);
                atomicAdd(&counts_priv[g], 1);
            }
        }
        for (int i = n / 4 * 4 + (blockIdx.x * blockDim.x + threadIdx.x); i < n; i += gridDim.x * blockDim.x) {
            int g = __ldg(&ids[i]);
        atomicAdd(&means_priv[g], __ldg(&values[i]));
        atomicAdd(&counts_priv[g], 1);
        }
    } else {
        for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
            int g = __ldg(&ids[i]);
        atomicAdd(&means_priv[g], __ldg(&values[i]));
        atomicAdd(&counts_priv[g], 1);
        }
    }
    __syncthreads();
    for (int bin = threadIdx.x; bin < 500; bin += blockDim.x) {
        const float bin_value = means_priv[bin];
        if (bin_value != 0.0f) atomicAdd(&means[bin], bin_value);
    }
    __syncthreads();
    for (int bin_ = threadIdx.x; bin_ < 500; bin_ += blockDim.x) {
        const int bin_value_ = counts_priv[bin_];
        if (bin_value_ != 0) atomicAdd(&counts[bin_], bin_value_);
    }
}

__global__ void __launch_bounds__(256) group_divide_naive(float* __restrict__  means, const int* __restrict__  counts) {
    // KLineage vectorize: the row in 16-byte packs of 4 when every packed pointer is aligned,
    // partitioned among the threads like the elements were; the elements after the last pack run scalar.
    if (((reinterpret_cast<unsigned long long>(means) | reinterpret_cast<unsigned long long>(counts)) % 16u) == 0) {
        for (long long kl_first = static_cast<long long>((blockIdx.x * blockDim.x + threadIdx.x)) * 4; kl_first + 3 < NUM_GROUPS; kl_first += static_cast<long long>((gridDim.x * blockDim.x)) * 4) {
            float4 kl_means = *reinterpret_cast<const float4*>(means + kl_first);
            float* kl_means_lane = reinterpret_cast<float*>(&kl_means);
            const uint4 kl_counts = *reinterpret_cast<const uint4*>(counts + kl_first);
            const int* kl_counts_lane = reinterpret_cast<const int*>(&kl_counts);
            #pragma unroll
            for (int kl_k = 0; kl_k < 4; ++kl_k) {
                kl_means_lane[kl_k] = kl_counts_lane[kl_k] > 0 ? kl_means_lane[kl_k] / kl_counts_lane[kl_k] : 0.0f;
            }
            *reinterpret_cast<float4*>(means + kl_first) = kl_means;
        }
        for (int g = NUM_GROUPS / 4 * 4 + (blockIdx.x * blockDim.x + threadIdx.x); g < NUM_GROUPS; g += gridDim.x * blockDim.x) means[g] = __ldg(&counts[g]) > 0 ? means[g] / __ldg(&counts[g]) : 0.0f;
    } else {
        for (int g = blockIdx.x * blockDim.x + threadIdx.x; g < NUM_GROUPS; g += gridDim.x * blockDim.x) means[g] = __ldg(&counts[g]) > 0 ? means[g] / __ldg(&counts[g]) : 0.0f;
    }
}

extern "C" void launch(const int* ids, const float* values, float* means, int* counts, int N, cudaStream_t stream) {
    cudaMemsetAsync(means, 0, NUM_GROUPS * sizeof(float), stream);
    cudaMemsetAsync(counts, 0, NUM_GROUPS * sizeof(int), stream);
    constexpr int threads = 256;
    group_accumulate_naive<<<(((N + threads - 1) / threads) < (132 * 8) ? ((N + threads - 1) / threads) : (132 * 8)), threads, 0, stream>>>(ids, values, means, counts, N);
    group_divide_naive<<<(((NUM_GROUPS + threads - 1) / threads) < (132 * 8) ? ((NUM_GROUPS + threads - 1) / threads) : (132 * 8)), threads, 0, stream>>>(means, counts);
}
