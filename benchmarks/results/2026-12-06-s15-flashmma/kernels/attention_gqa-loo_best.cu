// attention_gqa, naive: grouped-query cross attention in three phases through the fp32 scratch
// P (B, H, Sq, Sk): scores (one thread per score), softmax (one thread per row), weighted sum
// (one thread per output element). Query head h reads key/value head h / (H / G).
#include <cuda_runtime.h>
#include <cuda_fp16.h>
#include <math.h>

__global__ void __launch_bounds__(256) gqa_scores(const __half* __restrict__  Q, const __half* __restrict__  K, float* __restrict__  P, int B, int H, int G, int Sq, int Sk,
                           int D, float scale) {
    long long idx = ((long long)blockIdx.x * blockDim.x + threadIdx.x) / 32;
    const int lane = threadIdx.x & 31;
    if (idx >= (long long)B * H * Sq * Sk) return;
    int j = (int)(idx % Sk);
    long long row = idx / Sk;  // (b * H + h) * Sq + i
    long long bh = row / Sq;
    long long bg = (bh / H) * G + (bh % H) / (H / G);
    float acc = 0.0f;
    // KLineage vectorize: the row in 16-byte packs of 8 when every packed pointer is aligned,
    // partitioned among the threads like the elements were; the elements after the last pack run scalar.
    if (((reinterpret_cast<unsigned long long>(Q + (row * D)) | reinterpret_cast<unsigned long long>(K + ((bg * Sk + j) * D))) % 16u) == 0) {
        for (long long kl_first = static_cast<long long>(lane) * 8; kl_first + 7 < D; kl_first += static_cast<long long>(32) * 8) {
            const uint4 kl_Q = *reinterpret_cast<const uint4*>(Q + (row * D) + kl_first);
            const __half* kl_Q_lane = reinterpret_cast<const __half*>(&kl_Q);
            const uint4 kl_K = *reinterpret_cast<const uint4*>(K + ((bg * Sk + j) * D) + kl_first);
            const __half* kl_K_lane = reinterpret_cast<const __half*>(&kl_K);
            #pragma unroll
            for (int kl_k = 0; kl_k < 8; ++kl_k) {
                acc += __half2float(kl_Q_lane[kl_k]) * __half2float(kl_K_lane[kl_k]);
            }
        }
        for (int d = D / 8 * 8 + lane; d < D; d += 32) acc += __half2float(__ldg(&Q[row * D + d])) * __half2float(__ldg(&K[(bg * Sk + j) * D + d]));
    } else {
        for (int d = lane; d < D; d += 32) acc += __half2float(__ldg(&Q[row * D + d])) * __half2float(__ldg(&K[(bg * Sk + j) * D + d]));
    }
    for (int kl_off = 16; kl_off > 0; kl_off >>= 1) acc += __shfl_xor_sync(0xffffffffu, acc, kl_off);
    if (lane == 0) P[idx] = acc * scale;
}

__global__ void __launch_bounds__(256) gqa_softmax(float* __restrict__  P, int rows, int Sk) {
    long long r = blockIdx.x;
    if (r >= rows) return;
    float* p = P + r * Sk;
    float mx = -INFINITY;
    // KLineage vectorize: the row in 16-byte packs of 4 when every packed pointer is aligned,
    // partitioned among the threads like the elements were; the elements after the last pack run scalar.
    if (((reinterpret_cast<unsigned long long>(p)) % 16u) == 0) {
        for (long long kl_first = static_cast<long long>(threadIdx.x) * 4; kl_first + 3 < Sk; kl_first += static_cast<long long>(blockDim.x) * 4) {
            const float4 kl_p = *reinterpret_cast<const float4*>(p + kl_first);
            const float* kl_p_lane = reinterpret_cast<const float*>(&kl_p);
            #pragma unroll
            for (int kl_k = 0; kl_k < 4; ++kl_k) {
                mx = fmaxf(mx, kl_p_lane[kl_k]);
            }
        }
        for (int j = Sk / 4 * 4 + threadIdx.x; j < Sk; j += blockDim.x) mx = fmaxf(mx, p[j]);
    } else {
        for (int j = threadIdx.x; j < Sk; j += blockDim.x) mx = fmaxf(mx, p[j]);
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
    float sum = 0.0f;
    // KLineage vectorize: the row in 16-byte packs of 4 when every packed pointer is aligned,
    // partitioned among the threads like the elements were; the elements after the last pack run scalar.
    if (((reinterpret_cast<unsigned long long>(p)) % 16u) == 0) {
        for (long long kl_first1 = static_cast<long long>(threadIdx.x) * 4; kl_first1 + 3 < Sk; kl_first1 += static_cast<long long>(blockDim.x) * 4) {
            const float4 kl_p1 = *reinterpret_cast<const float4*>(p + kl_first1);
            const float* kl_p_lane1 = reinterpret_cast<const float*>(&kl_p1);
            #pragma unroll
            for (int kl_k1 = 0; kl_k1 < 4; ++kl_k1) {
                sum += __expf(kl_p_lane1[kl_k1] - mx);
            }
        }
        for (int j = Sk / 4 * 4 + threadIdx.x; j < Sk; j += blockDim.x) sum += __expf(p[j] - mx);
    } else {
        for (int j = threadIdx.x; j < Sk; j += blockDim.x) sum += __expf(p[j] - mx);
    }
    for (int kl_off = 16; kl_off > 0; kl_off >>= 1) sum += __shfl_xor_sync(0xffffffffu, sum, kl_off);
    {  // across the warps: one slot per warp, folded in order by every thread
        __shared__ float kl_s[32];
        if ((threadIdx.x & 31) == 0) kl_s[threadIdx.x >> 5] = sum;
        __syncthreads();
        sum = kl_s[0];
        for (int kl_w = 1; kl_w < static_cast<int>(blockDim.x >> 5); ++kl_w) sum += kl_s[kl_w];
        __syncthreads();  // the slots are free again
    }
    // KLineage vectorize: the row in 16-byte packs of 4 when every packed pointer is aligned,
    // partitioned among the threads like the elements were; the elements after the last pack run scalar.
    if (((reinterpret_cast<unsigned long long>(p)) % 16u) == 0) {
        const float inv_sum = __fdividef(1.0f, sum);
        for (long long kl_first2 = static_cast<long long>(threadIdx.x) * 4; kl_first2 + 3 < Sk; kl_first2 += static_cast<long long>(blockDim.x) * 4) {
            float4 kl_p2 = *reinterpret_cast<const float4*>(p + kl_first2);
            float* kl_p_lane2 = reinterpret_cast<float*>(&kl_p2);
            #pragma unroll
            for (int kl_k2 = 0; kl_k2 < 4; ++kl_k2) {
                kl_p_lane2[kl_k2] = __expf(kl_p_lane2[kl_k2] - mx) * inv_sum;
            }
            *reinterpret_cast<float4*>(p + kl_first2) = kl_p2;
        }
        const float inv_sum1 = __fdividef(1.0f, sum);
        for (int j = Sk / 4 * 4 + threadIdx.x; j < Sk; j += blockDim.x) p[j] = __expf(p[j] - mx) * inv_sum1;
    } else {
        const float inv_sum2 = __fdividef(1.0f, sum);
        for (int j = threadIdx.x; j < Sk; j += blockDim.x) p[j] = __expf(p[j] - mx) * inv_sum2;
    }
}

__global__ void __launch_bounds__(256) gqa_weighted_sum(const float* __restrict__  P, const __half* __restrict__  V, __half* __restrict__  O, int B, int H, int G, int Sq, int Sk,
                                 int D) {
    long long idx = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (idx >= (long long)B * H * Sq * D) return;
    int d = (int)(idx % D);
    long long row = idx / D;
    long long bh = row / Sq;
    long long bg = (bh / H) * G + (bh % H) / (H / G);
    const float* w = P + row * Sk;
    float acc = 0.0f;
    // KLineage vectorize: the row in 16-byte packs of 4 when every packed pointer is aligned,
    // partitioned among the threads like the elements were; the elements after the last pack run scalar.
    if (((reinterpret_cast<unsigned long long>(w)) % 16u) == 0) {
        for (long long kl_first = 0; kl_first + 3 < Sk; kl_first += 4) {
            const float4 kl_w = *reinterpret_cast<const float4*>(w + kl_first);
            const float* kl_w_lane = reinterpret_cast<const float*>(&kl_w);
            #pragma unroll
            for (int kl_k = 0; kl_k < 4; ++kl_k) {
                const int j = static_cast<int>(kl_first + kl_k);
                acc += kl_w_lane[kl_k] * __half2float(__ldg(&V[(bg * Sk + j) * D + d]));
            }
        }
        for (int j = Sk / 4 * 4; j < Sk; ++j) acc += __ldg(&w[j]) * __half2float(__ldg(&V[(bg * Sk + j) * D + d]));
    } else {
        for (int j = 0; j < Sk; ++j) acc += __ldg(&w[j]) * __half2float(__ldg(&V[(bg * Sk + j) * D + d]));
    }
    O[idx] = __float2half_rn(acc);
}

extern "C" void launch(const __half* Q, const __half* K, const __half* V, __half* O, float* P, int B, int H,
                       int G, int Sq, int Sk, int D, cudaStream_t stream) {
    const float scale = 1.0f / sqrtf((float)D);
    constexpr int T = 256;
    const int rows = B * H * Sq;
    long long n1 = (long long)rows * Sk, n3 = (long long)rows * D;
    gqa_scores<<<((unsigned)((n1 + T - 1) / T)) * 32, T, 0, stream>>>(Q, K, P, B, H, G, Sq, Sk, D, scale);
    gqa_softmax<<<rows, T, 0, stream>>>(P, rows, Sk);
    gqa_weighted_sum<<<(unsigned)((n3 + T - 1) / T), T, 0, stream>>>(P, V, O, B, H, G, Sq, Sk, D);
}
