// group_mean, naive: one thread per element adds its value and a one into the global per-group
// sums and counts with atomics; then one thread per group divides its sum by its count.
#include <cuda_runtime.h>

#define NUM_GROUPS 500

__global__ void group_accumulate_naive(const int* ids, const float* values, float* means, int* counts, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        int g = ids[i];
        atomicAdd(&means[g], values[i]);
        atomicAdd(&counts[g], 1);
    }
}

__global__ void group_divide_naive(float* means, const int* counts) {
    int g = blockIdx.x * blockDim.x + threadIdx.x;
    if (g < NUM_GROUPS) means[g] = counts[g] > 0 ? means[g] / counts[g] : 0.0f;
}

extern "C" void launch(const int* ids, const float* values, float* means, int* counts, int N, cudaStream_t stream) {
    cudaMemsetAsync(means, 0, NUM_GROUPS * sizeof(float), stream);
    cudaMemsetAsync(counts, 0, NUM_GROUPS * sizeof(int), stream);
    const int threads = 256;
    group_accumulate_naive<<<(N + threads - 1) / threads, threads, 0, stream>>>(ids, values, means, counts, N);
    group_divide_naive<<<(NUM_GROUPS + threads - 1) / threads, threads, 0, stream>>>(means, counts);
}
