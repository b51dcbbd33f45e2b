// group_mean, expert: per-group mean and count of fp32 values over int32 group ids.
//
// Pass 1 (sums and counts): one wave of blocks walks the input with a grid-stride loop of 128-bit
// loads (an int4 of ids and a float4 of values per step, read-only path; a scalar tail for the
// last N % 4 elements, and a scalar path when a pointer is not 16-byte aligned). Each block keeps
// its own 500 sums and 500 counts in shared memory, so the contended atomics stay on the SM, and
// adds each touched group to the outputs with one global atomic per table: at most 1000 global
// atomics per block instead of two per element.
// Pass 2 (the means): one thread per group divides its sum by its count.
#include <cuda_runtime.h>
#include <stdint.h>

namespace {

constexpr int kGroups = 500;
constexpr int kThreads = 512;

__global__ void __launch_bounds__(kThreads)
group_accumulate_kernel(const int* __restrict__ ids, const float* __restrict__ values, float* __restrict__ means,
                        int* __restrict__ counts, int n, int n4) {
    __shared__ float block_sums[kGroups];
    __shared__ int block_counts[kGroups];
    // Each table is cleared and flushed between its own barriers (two extra barriers per block,
    // once): every table is then a self-contained private copy.
    for (int g = threadIdx.x; g < kGroups; g += blockDim.x) block_sums[g] = 0.0f;
    __syncthreads();
    for (int g = threadIdx.x; g < kGroups; g += blockDim.x) block_counts[g] = 0;
    __syncthreads();
    const float4* __restrict__ values4 = reinterpret_cast<const float4*>(values);
    const int4* __restrict__ ids4 = reinterpret_cast<const int4*>(ids);
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n4; i += gridDim.x * blockDim.x) {
        const int4 g4 = __ldg(&ids4[i]);
        const float4 v4 = __ldg(&values4[i]);
        const int gs[4] = {g4.x, g4.y, g4.z, g4.w};
        const float vs[4] = {v4.x, v4.y, v4.z, v4.w};
#pragma unroll
        for (int k = 0; k < 4; ++k) {
            atomicAdd(&block_sums[gs[k]], vs[k]);
            atomicAdd(&block_counts[gs[k]], 1);
        }
    }
    for (int i = n4 * 4 + blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
        const int tail_group = __ldg(&ids[i]);
        atomicAdd(&block_sums[tail_group], __ldg(&values[i]));
        atomicAdd(&block_counts[tail_group], 1);
    }
    __syncthreads();
    for (int g = threadIdx.x; g < kGroups; g += blockDim.x)
        if (block_sums[g] != 0.0f) atomicAdd(&means[g], block_sums[g]);
    __syncthreads();
    for (int g = threadIdx.x; g < kGroups; g += blockDim.x)
        if (block_counts[g] != 0) atomicAdd(&counts[g], block_counts[g]);
}

__global__ void group_divide_kernel(float* __restrict__ means, const int* __restrict__ counts) {
    const int g = blockIdx.x * blockDim.x + threadIdx.x;
    if (g < kGroups) {
        const int c = counts[g];
        means[g] = c > 0 ? means[g] / static_cast<float>(c) : 0.0f;
    }
}

// How many accumulate blocks the whole device holds at once (looked up at the first launch):
// more would only queue behind the first wave.
int resident_blocks() {
    static int cached = -1;
    if (cached < 0) {
        int device = 0, multiprocessors = 0, per_multiprocessor = 0;
        cudaGetDevice(&device);
        cudaDeviceGetAttribute(&multiprocessors, cudaDevAttrMultiProcessorCount, device);
        cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_multiprocessor, group_accumulate_kernel, kThreads, 0);
        if (multiprocessors <= 0) multiprocessors = 132;
        if (per_multiprocessor <= 0) per_multiprocessor = 2;
        cached = multiprocessors * per_multiprocessor;
    }
    return cached;
}

}  // namespace

extern "C" void launch(const int* ids, const float* values, float* means, int* counts, int N, cudaStream_t stream) {
    cudaMemsetAsync(counts, 0, sizeof(int) * kGroups, stream);
    cudaMemsetAsync(means, 0, sizeof(float) * kGroups, stream);
    // 128-bit loads need both pointers on 16-byte boundaries; otherwise every element is a tail
    const uintptr_t either = reinterpret_cast<uintptr_t>(ids) | reinterpret_cast<uintptr_t>(values);
    const int n4 = (either % 16 == 0) ? N / 4 : 0;
    const int items = (n4 == 0) ? N : n4;
    const int wanted = (items + kThreads - 1) / kThreads;
    const int blocks = wanted < 1 ? 1 : (wanted < resident_blocks() ? wanted : resident_blocks());
    group_accumulate_kernel<<<blocks, kThreads, 0, stream>>>(ids, values, means, counts, N, n4);
    group_divide_kernel<<<(kGroups + 255) / 256, 256, 0, stream>>>(means, counts);
}
