// class_weight_share, expert: each class's share of the total fp32 weight over int32 labels.
//
// Pass 1 (the sums):
// One wave of blocks (SM count x resident blocks per SM) walks the input with a grid-stride loop
// of 128-bit loads (an int4 of labels and a float4 of weights per step, through the read-only
// path; a scalar tail for the last N % 4 elements, and a scalar path when either pointer is not
// 16-byte aligned). Each block accumulates into its own copy of the 1000 sums in shared memory
// (shared-memory atomics: cheap, and contended only within the block), then adds every non-zero
// sum to the output with one global atomic: at most 1000 global atomics per block instead of one
// per element.
// Pass 2 (the shares): one block of 1024 threads holds one sum each, adds them up with warp
// shuffles and one shared slot per warp, and divides its own sum by the total.
#include <cuda_runtime.h>
#include <stdint.h>

namespace {

constexpr int kClasses = 1000;
constexpr int kThreads = 512;
constexpr int kFinalThreads = 1024;
static_assert(kClasses <= kFinalThreads, "pass 2 keeps one sum per thread");

__global__ void __launch_bounds__(kThreads)
class_weight_sum_kernel(const int* __restrict__ labels, const float* __restrict__ weights,
                        float* __restrict__ out, int n, int n4) {
    __shared__ float sums[kClasses];
    for (int c = threadIdx.x; c < kClasses; c += blockDim.x) sums[c] = 0.0f;
    __syncthreads();
    const int4* __restrict__ labels4 = reinterpret_cast<const int4*>(labels);
    const float4* __restrict__ weights4 = reinterpret_cast<const float4*>(weights);
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n4; i += gridDim.x * blockDim.x) {
        const int4 l = __ldg(&labels4[i]);
        const float4 w = __ldg(&weights4[i]);
        const int c[4] = {l.x, l.y, l.z, l.w};
        const float v[4] = {w.x, w.y, w.z, w.w};
#pragma unroll
        for (int k = 0; k < 4; ++k) atomicAdd(&sums[c[k]], v[k]);
    }
    for (int i = n4 * 4 + blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
        atomicAdd(&sums[__ldg(&labels[i])], __ldg(&weights[i]));
    __syncthreads();
    for (int c = threadIdx.x; c < kClasses; c += blockDim.x)
        if (sums[c] != 0.0f) atomicAdd(&out[c], sums[c]);
}

__global__ void __launch_bounds__(kFinalThreads) class_share_finalize(float* __restrict__ out) {
    __shared__ float warp_totals[kFinalThreads / 32];
    const float s = threadIdx.x < kClasses ? out[threadIdx.x] : 0.0f;
    float t = s;
#pragma unroll
    for (int offset = 16; offset > 0; offset >>= 1) t += __shfl_xor_sync(0xffffffffu, t, offset);
    if ((threadIdx.x & 31) == 0) warp_totals[threadIdx.x >> 5] = t;
    __syncthreads();
    t = 0.0f;
#pragma unroll
    for (int w = 0; w < kFinalThreads / 32; ++w) t += warp_totals[w];
    if (threadIdx.x < kClasses) out[threadIdx.x] = s / t;
}

// Blocks that fill every multiprocessor once (asked once, then kept).
int one_wave() {
    static int blocks = 0;
    if (blocks == 0) {
        int dev = 0, sms = 0, per_sm = 0;
        if (cudaGetDevice(&dev) != cudaSuccess ||
            cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev) != cudaSuccess || sms <= 0)
            sms = 132;
        if (cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, class_weight_sum_kernel, kThreads, 0) !=
                cudaSuccess || per_sm <= 0)
            per_sm = 2;
        blocks = sms * per_sm;
    }
    return blocks;
}

bool aligned16(const void* p) { return (reinterpret_cast<uintptr_t>(p) & 15u) == 0; }

}  // namespace

extern "C" void launch(const int* labels, const float* weights, float* out, int N, cudaStream_t stream) {
    cudaMemsetAsync(out, 0, kClasses * sizeof(float), stream);
    const int n4 = aligned16(labels) && aligned16(weights) ? N / 4 : 0;
    const int work = n4 > 0 ? n4 : N;
    int blocks = (work + kThreads - 1) / kThreads;
    if (blocks < 1) blocks = 1;
    if (blocks > one_wave()) blocks = one_wave();
    class_weight_sum_kernel<<<blocks, kThreads, 0, stream>>>(labels, weights, out, N, n4);
    class_share_finalize<<<1, kFinalThreads, 0, stream>>>(out);
}
