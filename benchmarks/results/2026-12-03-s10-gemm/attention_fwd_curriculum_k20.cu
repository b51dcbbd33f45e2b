// attention_fwd, naive: three phases through the fp32 scratch P (B, H, S, S):
// scores (one thread per score), softmax (one thread per row), weighted sum (one thread per
// output element). Plain loops over global memory.
#include <cuda_runtime.h>
#include <cuda_fp16.h>
#include <math.h>

__global__ void attn_scores(const __half* __restrict__  Q, const __half* __restrict__  K, float* __restrict__  P, int BH, int S, int D, int causal,
                            float scale) {
    long long idx = ((long long)blockIdx.x * blockDim.x + threadIdx.x) / 32;
    const int lane = threadIdx.x & 31;
    long long total = (long long)BH * S * S;
    if (idx >= total) return;
    int j = (int)(idx % S);
    int i = (int)((idx / S) % S);
    long long bh = idx / ((long long)S * S);
    const __half* q = Q + (bh * S + i) * D;
    const __half* k = K + (bh * S + j) * D;
    float acc = 0.0f;
    // KLineage vectorize: the row in 16-byte packs of 8 when every packed pointer is aligned,
    // partitioned among the threads like the elements were; the elements after the last pack run scalar.
    if (((reinterpret_cast<unsigned long long>(q) | reinterpret_cast<unsigned long long>(k)) % 16u) == 0) {
        for (long long kl_first = static_cast<long long>(lane) * 8; kl_first + 7 < D; kl_first += static_cast<long long>(32) * 8) {
            const uint4 kl_q = *reinterpret_cast<const uint4*>(q + kl_first);
            const __half* kl_q_lane = reinterpret_cast<const __half*>(&kl_q);
            const uint4 kl_k1 = *reinterpret_cast<const uint4*>(k + kl_first);
            const __half* kl_k_lane = reinterpret_cast<const __half*>(&kl_k1);
            #pragma unroll
            for (int kl_k = 0; kl_k < 8; ++kl_k) {
                acc += __half2float(kl_q_lane[kl_k]) * __half2float(kl_k_lane[kl_k]);
            }
        }
        for (int d = D / 8 * 8 + lane; d < D; d += 32) acc += __half2float(__ldg(&q[d])) * __half2float(__ldg(&k[d]));
    } else {
        for (int d = lane; d < D; d += 32) acc += __half2float(__ldg(&q[d])) * __half2float(__ldg(&k[d]));
    }
    for (int kl_off = 16; kl_off > 0; kl_off >>= 1) acc += __shfl_xor_sync(0xffffffffu, acc, kl_off);
    if (lane == 0) P[idx] = (causal && j > i) ? -INFINITY : acc * scale;
}

__global__ void attn_softmax(float* __restrict__  P, int BH, int S) {
    long long row = ((long long)blockIdx.x * blockDim.x + threadIdx.x) / 32;
    const int lane = threadIdx.x & 31;
    if (row >= (long long)BH * S) return;
    float* p = P + row * S;
    float mx = -INFINITY;
    // KLineage vectorize: the row in 16-byte packs of 4 when every packed pointer is aligned,
    // partitioned among the threads like the elements were; the elements after the last pack run scalar.
    if (((reinterpret_cast<unsigned long long>(p)) % 16u) == 0) {
        for (long long kl_first = static_cast<long long>(lane) * 4; kl_first + 3 < S; kl_first += static_cast<long long>(32) * 4) {
            const float4 kl_p = *reinterpret_cast<const float4*>(p + kl_first);
            const float* kl_p_lane = reinterpret_cast<const float*>(&kl_p);
            #pragma unroll
            for (int kl_k = 0; kl_k < 4; ++kl_k) {
                mx = fmaxf(mx, kl_p_lane[kl_k]);
            }
        }
        for (int j = S / 4 * 4 + lane; j < S; j += 32) mx = fmaxf(mx, p[j]);
    } else {
        for (int j = lane; j < S; j += 32) mx = fmaxf(mx, p[j]);
    }
    for (int kl_off = 16; kl_off > 0; kl_off >>= 1) mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, kl_off));
    float sum = 0.0f;
    // KLineage vectorize: the row in 16-byte packs of 4 when every packed pointer is aligned,
    // partitioned among the threads like the elements were; the elements after the last pack run scalar.
    if (((reinterpret_cast<unsigned long long>(p)) % 16u) == 0) {
        for (long long kl_first1 = static_cast<long long>(lane) * 4; kl_first1 + 3 < S; kl_first1 += static_cast<long long>(32) * 4) {
            const float4 kl_p1 = *reinterpret_cast<const float4*>(p + kl_first1);
            const float* kl_p_lane1 = reinterpret_cast<const float*>(&kl_p1);
            #pragma unroll
            for (int kl_k1 = 0; kl_k1 < 4; ++kl_k1) {
                sum += __expf(kl_p_lane1[kl_k1] - mx);
            }
        }
        for (int j = S / 4 * 4 + lane; j < S; j += 32) sum += __expf(p[j] - mx);
    } else {
        for (int j = lane; j < S; j += 32) sum += __expf(p[j] - mx);
    }
    for (int kl_off = 16; kl_off > 0; kl_off >>= 1) sum += __shfl_xor_sync(0xffffffffu, sum, kl_off);
    // KLineage vectorize: the row in 16-byte packs of 4 when every packed pointer is aligned,
    // partitioned among the threads like the elements were; the elements after the last pack run scalar.
    if (((reinterpret_cast<unsigned long long>(p)) % 16u) == 0) {
        const float inv_sum = __fdividef(1.0f, sum);
        for (long long kl_first2 = static_cast<long long>(lane) * 4; kl_first2 + 3 < S; kl_first2 += static_cast<long long>(32) * 4) {
            float4 kl_p2 = *reinterpret_cast<const float4*>(p + kl_first2);
            float* kl_p_lane2 = reinterpret_cast<float*>(&kl_p2);
            #pragma unroll
            for (int kl_k2 = 0; kl_k2 < 4; ++kl_k2) {
                kl_p_lane2[kl_k2] = __expf(kl_p_lane2[kl_k2] - mx) * inv_sum;
            }
            *reinterpret_cast<float4*>(p + kl_first2) = kl_p2;
        }
        const float inv_sum1 = __fdividef(1.0f, sum);
        for (int j = S / 4 * 4 + lane; j < S; j += 32) p[j] = __expf(p[j] - mx) * inv_sum1;
    } else {
        const float inv_sum2 = __fdividef(1.0f, sum);
        for (int j = lane; j < S; j += 32) p[j] = __expf(p[j] - mx) * inv_sum2;
    }
}

__global__ void attn_weighted_sum(const float* __restrict__  P, const __half* __restrict__  V, __half* __restrict__  O, int BH, int S, int D) {
    long long idx = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (idx >= (long long)BH * S * D) return;
    int d = (int)(idx % D);
    long long row = idx / D;  // bh * S + i
    long long bh = row / S;
    const float* p = P + row * S;
    float acc = 0.0f;
    // KLineage vectorize: the row in 16-byte packs of 4 when every packed pointer is aligned,
    // partitioned among the threads like the elements were; the elements after the last pack run scalar.
    if (((reinterpret_cast<unsigned long long>(p)) % 16u) == 0) {
        for (long long kl_first = 0; kl_first + 3 < S; kl_first += 4) {
            const float4 kl_p = *reinterpret_cast<const float4*>(p + kl_first);
            const float* kl_p_lane = reinterpret_cast<const float*>(&kl_p);
            #pragma unroll
            for (int kl_k = 0; kl_k < 4; ++kl_k) {
                const int j = static_cast<int>(kl_first + kl_k);
                acc += kl_p_lane[kl_k] * __half2float(__ldg(&V[(bh * S + j) * D + d]));
            }
        }
        for (int j = S / 4 * 4; j < S; ++j) acc += __ldg(&p[j]) * __half2float(__ldg(&V[(bh * S + j) * D + d]));
    } else {
        for (int j = 0; j < S; ++j) acc += __ldg(&p[j]) * __half2float(__ldg(&V[(bh * S + j) * D + d]));
    }
    O[idx] = __float2half_rn(acc);
}

extern "C" void launch(const __half* Q, const __half* K, const __half* V, __half* O, float* P, int B, int H,
                       int S, int D, int causal, cudaStream_t stream) {
    const int BH = B * H;
    const float scale = 1.0f / sqrtf((float)D);
    const int T = 256;
    long long n1 = (long long)BH * S * S, n2 = (long long)BH * S, n3 = (long long)BH * S * D;
    attn_scores<<<((unsigned)((n1 + T - 1) / T)) * 32, T, 0, stream>>>(Q, K, P, BH, S, D, causal, scale);
    attn_softmax<<<((unsigned)((n2 + T - 1) / T)) * 32, T, 0, stream>>>(P, BH, S);
    attn_weighted_sum<<<(unsigned)((n3 + T - 1) / T), T, 0, stream>>>(P, V, O, BH, S, D);
}
