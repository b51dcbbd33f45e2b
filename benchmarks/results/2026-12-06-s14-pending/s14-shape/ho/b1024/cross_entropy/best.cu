// cross_entropy, naive: one thread per row; max pass, sum-of-exp pass, then the target's logit.
#include <cuda_runtime.h>
#include <math.h>

__global__ void __launch_bounds__(1024) cross_entropy_naive(const float* __restrict__  logits, const long long* __restrict__  target, float* __restrict__  loss, int M, int C) {
    int row = blockIdx.x;
    if (row >= M) return;
    const float* z = logits + (size_t)row * C;
    float top = -INFINITY;
    // KLineage vectorize: the row in 16-byte packs of 4 when every packed pointer is aligned,
    // partitioned among the threads like the elements were; the elements after the last pack run scalar.
    if (((reinterpret_cast<unsigned long long>(z)) % 16u) == 0) {
        for (long long kl_first = static_cast<long long>(threadIdx.x) * 4; kl_first + 3 < C; kl_first += static_cast<long long>(blockDim.x) * 4) {
            const float4 kl_z = *reinterpret_cast<const float4*>(z + kl_first);
            const float* kl_z_lane = reinterpret_cast<const float*>(&kl_z);
            #pragma unroll
            for (int kl_k = 0; kl_k < 4; ++kl_k) {
                top = fmaxf(top, kl_z_lane[kl_k]);
            }
        }
        for (int c = C / 4 * 4 + threadIdx.x; c < C; c += blockDim.x) top = fmaxf(top, __ldg(&z[c]));
    } else {
        for (int c = threadIdx.x; c < C; c += blockDim.x) top = fmaxf(top, __ldg(&z[c]));
    }
    for (int kl_off = 16; kl_off > 0; kl_off >>= 1) top = fmaxf(top, __shfl_xor_sync(0xffffffffu, top, kl_off));
    {  // across the warps: one slot per warp, folded in order by every thread
        __shared__ float kl_s[32];
        if ((threadIdx.x & 31) == 0) kl_s[threadIdx.x >> 5] = top;
        __syncthreads();
        top = kl_s[0];
        for (int kl_w = 1; kl_w < static_cast<int>(blockDim.x >> 5); ++kl_w) top = fmaxf(top, kl_s[kl_w]);
        __syncthreads();  // the slots are free again
    }
    float total = 0.0f;
    // KLineage vectorize: the row in 16-byte packs of 4 when every packed pointer is aligned,
    // partitioned among the threads like the elements were; the elements after the last pack run scalar.
    if (((reinterpret_cast<unsigned long long>(z)) % 16u) == 0) {
        for (long long kl_first1 = static_cast<long long>(threadIdx.x) * 4; kl_first1 + 3 < C; kl_first1 += static_cast<long long>(blockDim.x) * 4) {
            const float4 kl_z1 = *reinterpret_cast<const float4*>(z + kl_first1);
            const float* kl_z_lane1 = reinterpret_cast<const float*>(&kl_z1);
            #pragma unroll
            for (int kl_k1 = 0; kl_k1 < 4; ++kl_k1) {
                total += __expf(kl_z_lane1[kl_k1] - top);
            }
        }
        for (int c = C / 4 * 4 + threadIdx.x; c < C; c += blockDim.x) total += __expf(__ldg(&z[c]) - top);
    } else {
        for (int c = threadIdx.x; c < C; c += blockDim.x) total += __expf(__ldg(&z[c]) - top);
    }
    for (int kl_off = 16; kl_off > 0; kl_off >>= 1) total += __shfl_xor_sync(0xffffffffu, total, kl_off);
    {  // across the warps: one slot per warp, folded in order by every thread
        __shared__ float kl_s[32];
        if ((threadIdx.x & 31) == 0) kl_s[threadIdx.x >> 5] = total;
        __syncthreads();
        total = kl_s[0];
        for (int kl_w = 1; kl_w < static_cast<int>(blockDim.x >> 5); ++kl_w) total += kl_s[kl_w];
        __syncthreads();  // the slots are free again
    }
    if (threadIdx.x == 0) loss[row] = __logf(total) + top - __ldg(&z[target[row]]);
}

extern "C" void launch(const float* logits, const long long* target, float* loss, int M, int C,
                       cudaStream_t stream) {
    constexpr int threads = 1024;
    cross_entropy_naive<<<M, threads, 0, stream>>>(logits, target, loss, M, C);
}
