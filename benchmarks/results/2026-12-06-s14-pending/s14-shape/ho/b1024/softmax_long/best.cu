// softmax_long, naive: one thread per row; max, normalizer, and output passes over global memory.
#include <cuda_runtime.h>
#include <math.h>

__global__ void __launch_bounds__(1024) softmax_long_naive(const float* __restrict__  x, float* __restrict__  y, int M, int N) {
    int row = blockIdx.x;
    if (row >= M) return;
    size_t base = (size_t)row * N;
    float mx = -INFINITY;
    // KLineage vectorize: the row in 16-byte packs of 4 when every packed pointer is aligned,
    // partitioned among the threads like the elements were; the elements after the last pack run scalar.
    if (((reinterpret_cast<unsigned long long>(x + base)) % 16u) == 0) {
        for (long long kl_first = static_cast<long long>(threadIdx.x) * 4; kl_first + 3 < N; kl_first += static_cast<long long>(blockDim.x) * 4) {
            const float4 kl_x = *reinterpret_cast<const float4*>(x + base + kl_first);
            const float* kl_x_lane = reinterpret_cast<const float*>(&kl_x);
            #pragma unroll
            for (int kl_k = 0; kl_k < 4; ++kl_k) {
                mx = fmaxf(mx, kl_x_lane[kl_k]);
            }
        }
        for (int j = N / 4 * 4 + threadIdx.x; j < N; j += blockDim.x) mx = fmaxf(mx, __ldg(&x[base + j]));
    } else {
        for (int j = threadIdx.x; j < N; j += blockDim.x) mx = fmaxf(mx, __ldg(&x[base + j]));
    }
    for (int kl_off = 16; kl_off > 0; kl_off >>= 1) mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, kl_off));
    {  // across the warps: one slot per warp, folded in order by every thread
        __shared__ float kl_s[32];
        if ((threadIdx.x & 31) == 0) kl_s[threadIdx.x >> 5] = mx;
        __syncthreads();
        mx = kl_s[0];
        for (int kl_w = 1; kl_w < static_cast<int>(blockDim.x >> 5); ++kl_w) mx = fmaxf(mx, kl_s[kl_w]);
        __syncthreads();  // the slots are free again
    }
    float denom = 0.0f;
    // KLineage vectorize: the row in 16-byte packs of 4 when every packed pointer is aligned,
    // partitioned among the threads like the elements were; the elements after the last pack run scalar.
    if (((reinterpret_cast<unsigned long long>(x + base)) % 16u) == 0) {
        for (long long kl_first1 = static_cast<long long>(threadIdx.x) * 4; kl_first1 + 3 < N; kl_first1 += static_cast<long long>(blockDim.x) * 4) {
            const float4 kl_x1 = *reinterpret_cast<const float4*>(x + base + kl_first1);
            const float* kl_x_lane1 = reinterpret_cast<const float*>(&kl_x1);
            #pragma unroll
            for (int kl_k1 = 0; kl_k1 < 4; ++kl_k1) {
                denom += __expf(kl_x_lane1[kl_k1] - mx);
            }
        }
        for (int j = N / 4 * 4 + threadIdx.x; j < N; j += blockDim.x) denom += __expf(__ldg(&x[base + j]) - mx);
    } else {
        for (int j = threadIdx.x; j < N; j += blockDim.x) denom += __expf(__ldg(&x[base + j]) - mx);
    }
    for (int kl_off = 16; kl_off > 0; kl_off >>= 1) denom += __shfl_xor_sync(0xffffffffu, denom, kl_off);
    {  // across the warps: one slot per warp, folded in order by every thread
        __shared__ float kl_s[32];
        if ((threadIdx.x & 31) == 0) kl_s[threadIdx.x >> 5] = denom;
        __syncthreads();
        denom = kl_s[0];
        for (int kl_w = 1; kl_w < static_cast<int>(blockDim.x >> 5); ++kl_w) denom += kl_s[kl_w];
        __syncthreads();  // the slots are free again
    }
    float inv = __fdividef(1.0f, denom);
    // KLineage vectorize: the row in 16-byte packs of 4 when every packed pointer is aligned,
    // partitioned among the threads like the elements were; the elements after the last pack run scalar.
    if (((reinterpret_cast<unsigned long long>(y + base) | reinterpret_cast<unsigned long long>(x + base)) % 16u) == 0) {
        for (long long kl_first2 = static_cast<long long>(threadIdx.x) * 4; kl_first2 + 3 < N; kl_first2 += static_cast<long long>(blockDim.x) * 4) {
            float4 kl_y;
            float* kl_y_lane = reinterpret_cast<float*>(&kl_y);
            const float4 kl_x2 = *reinterpret_cast<const float4*>(x + base + kl_first2);
            const float* kl_x_lane2 = reinterpret_cast<const float*>(&kl_x2);
            #pragma unroll
            for (int kl_k2 = 0; kl_k2 < 4; ++kl_k2) {
                kl_y_lane[kl_k2] = __expf(kl_x_lane2[kl_k2] - mx) * inv;
            }
            *reinterpret_cast<float4*>(y + base + kl_first2) = kl_y;
        }
        for (int j = N / 4 * 4 + threadIdx.x; j < N; j += blockDim.x) y[base + j] = __expf(__ldg(&x[base + j]) - mx) * inv;
    } else {
        for (int j = threadIdx.x; j < N; j += blockDim.x) y[base + j] = __expf(__ldg(&x[base + j]) - mx) * inv;
    }
}

extern "C" void launch(const float* x, float* y, int M, int N, cudaStream_t stream) {
    constexpr int threads = 1024;
    softmax_long_naive<<<M, threads, 0, stream>>>(x, y, M, N);
}
