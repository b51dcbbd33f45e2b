#include <mma.h>
// attention_fwd, naive: three phases through the fp32 scratch P (B, H, S, S):
// scores (one thread per score), softmax (one thread per row), weighted sum (one thread per
// output element). Plain loops over global memory.
#include <cuda_runtime.h>
#include <cuda_fp16.h>
#include <math.h>

__global__ void attn_scores_flash(const __half* Q, const __half* K, int BH, int S, int D, int causal, float scale, const __half* V, __half* O) {
    extern __shared__ __align__(128) unsigned char kl_tsm[];
    auto kl_rowok = [&](long long row) -> bool {

        return !((row >= (long long)BH * S));
    };
    auto kl_qry = [&](long long idx, int d) -> float {
        long long total = (long long)BH * S * S;
        if (idx >= total) return 0.0f;
        int j = (int)(idx % S);
        int i = (int)((idx / S) % S);
        long long bh = idx / ((long long)S * S);
        const __half* q = Q + (bh * S + i) * D;
        const __half* k = K + (bh * S + j) * D;
        return __half2float(q[d]);
    };
    auto kl_key = [&](long long idx, int d) -> float {
        long long total = (long long)BH * S * S;
        if (idx >= total) return 0.0f;
        int j = (int)(idx % S);
        int i = (int)((idx / S) % S);
        long long bh = idx / ((long long)S * S);
        const __half* q = Q + (bh * S + i) * D;
        const __half* k = K + (bh * S + j) * D;
        return __half2float(k[d]);
    };
    auto kl_qadr = [&](long long idx) -> const void* {
        long long total = (long long)BH * S * S;
        if (idx >= total) return nullptr;
        int j = (int)(idx % S);
        int i = (int)((idx / S) % S);
        long long bh = idx / ((long long)S * S);
        const __half* q = Q + (bh * S + i) * D;
        const __half* k = K + (bh * S + j) * D;
        const int d = 0;
        return (const void*)&(q[d]);
    };
    auto kl_kadr = [&](long long idx) -> const void* {
        long long total = (long long)BH * S * S;
        if (idx >= total) return nullptr;
        int j = (int)(idx % S);
        int i = (int)((idx / S) % S);
        long long bh = idx / ((long long)S * S);
        const __half* q = Q + (bh * S + i) * D;
        const __half* k = K + (bh * S + j) * D;
        const int d = 0;
        return (const void*)&(k[d]);
    };
    auto kl_val = [&](long long idx, float acc) -> float {
        long long total = (long long)BH * S * S;
        if (idx >= total) return -INFINITY;
        int j = (int)(idx % S);
        int i = (int)((idx / S) % S);
        long long bh = idx / ((long long)S * S);
        const __half* q = Q + (bh * S + i) * D;
        const __half* k = K + (bh * S + j) * D;
        return (causal && j > i) ? -INFINITY : acc * scale;
    };
    auto kl_direct = [&](long long idx) -> float {
        long long total = (long long)BH * S * S;
        if (idx >= total) return -INFINITY;
        int j = (int)(idx % S);
        int i = (int)((idx / S) % S);
        long long bh = idx / ((long long)S * S);
        const __half* q = Q + (bh * S + i) * D;
        const __half* k = K + (bh * S + j) * D;
        float acc = 0.0f;
        for (int d = 0; d < D; ++d) acc += __half2float(q[d]) * __half2float(k[d]);
        return (causal && j > i) ? -INFINITY : acc * scale;
    };
    auto kl_term = [&](long long idx, int j) -> float {
        if (idx >= (long long)BH * S * D) return 0.0f;
        int d = (int)(idx % D);
        long long row = idx / D;
        long long bh = row / S;
        return __half2float(V[(bh * S + j) * D + d]);
    };
    auto kl_vadr = [&](long long idx, int j) -> const void* {
        if (idx >= (long long)BH * S * D) return nullptr;
        int d = (int)(idx % D);
        long long row = idx / D;
        long long bh = row / S;
        return (const void*)&(V[(bh * S + j) * D + d]);
    };
    auto kl_out = [&](long long idx, float acc) -> void {
        if (idx >= (long long)BH * S * D) return;
        int d = (int)(idx % D);
        long long row = idx / D;
        long long bh = row / S;
        O[idx] = __float2half_rn(acc);
    };
    const int kl_dq = (int)(D);
    const int kl_dv = (int)(D);
    const int kl_dqp = (kl_dq + 15) / 16 * 16, kl_dvp = (kl_dv + 15) / 16 * 16;
    const long long kl_len = (long long)(S);
    const long long kl_r0 = (long long)blockIdx.x * 32;
    float* kl_os = reinterpret_cast<float*>(kl_tsm);
    float* kl_sc = kl_os + 32 * kl_dvp;
    float* kl_ps = kl_sc + 1024;
    float* kl_m = kl_ps + 1056;
    float* kl_l = kl_m + 32;
    float* kl_al = kl_l + 32;
    __half* kl_qh = reinterpret_cast<__half*>(kl_al + 32);
    __half* kl_kh = kl_qh + 32 * kl_dqp;
    __half* kl_vh = kl_kh + 32 * kl_dqp;
    __half* kl_ph = kl_vh + 32 * kl_dvp;
    const int kl_t = threadIdx.x, kl_lane = kl_t % 32, kl_warp = kl_t / 32;
    for (int kl_e = kl_t; kl_e < 32; kl_e += 256) {
        kl_m[kl_e] = -INFINITY;
        kl_l[kl_e] = 0.0f;
    }
    for (int kl_e = kl_t; kl_e < 32 * kl_dvp; kl_e += 256) kl_os[kl_e] = 0.0f;
    int kl_qok = 1;
    if (kl_t < 32 && kl_rowok(kl_r0 + kl_t))
        kl_qok = kl_qadr((kl_r0 + kl_t) * kl_len) == kl_qadr((kl_r0 + kl_t) * kl_len + kl_len - 1);
    kl_qok = __syncthreads_and(kl_qok);
    if (kl_qok)
        for (int kl_e = kl_t; kl_e < 32 * kl_dqp; kl_e += 256) {
            const long long kl_r = kl_r0 + kl_e / kl_dqp;
            const int kl_d = kl_e % kl_dqp;
            kl_qh[kl_e] = __float2half_rn(kl_d < kl_dq && kl_rowok(kl_r) ? kl_qry(kl_r * kl_len, kl_d) : 0.0f);
        }
    for (long long kl_j0 = 0; kl_j0 < kl_len; kl_j0 += 32) {
        const long long kl_jl = min(kl_j0 + 31, kl_len - 1);
        int kl_live = 0, kl_uni = 1;
        for (int kl_e = kl_t; kl_e < 1024; kl_e += 256) {
            const long long kl_r = kl_r0 + kl_e / 32, kl_j = kl_j0 + kl_e % 32, kl_x = kl_r * kl_len + kl_j;
            const bool kl_on = kl_j < kl_len && kl_rowok(kl_r) &&
                               !(kl_val(kl_x, 0.0f) == -INFINITY && kl_val(kl_x, 1.0f) == -INFINITY);
            kl_ps[(kl_e / 32) * 33 + kl_e % 32] = kl_on ? 0.0f : -INFINITY;
            kl_live |= kl_on;
        }
        if (kl_t < 32 && kl_rowok(kl_r0 + kl_t)) {
            const long long kl_r = kl_r0 + kl_t;
            kl_uni = kl_kadr(kl_r * kl_len + kl_j0) == kl_kadr(kl_r0 * kl_len + kl_j0) &&
                     kl_kadr(kl_r * kl_len + kl_jl) == kl_kadr(kl_r0 * kl_len + kl_jl) &&
                     kl_vadr(kl_r * kl_dv, kl_j0) == kl_vadr(kl_r0 * kl_dv, kl_j0) &&
                     kl_vadr(kl_r * kl_dv + kl_dv - 1, kl_jl) == kl_vadr(kl_r0 * kl_dv + kl_dv - 1, kl_jl);
        }
        kl_live = __syncthreads_or(kl_live);
        kl_uni = __syncthreads_and(kl_uni);
        if (!kl_live) continue;
        if (kl_uni) {
            for (int kl_e = kl_t; kl_e < 32 * kl_dqp; kl_e += 256) {
                const long long kl_j = kl_j0 + kl_e / kl_dqp;
                const int kl_d = kl_e % kl_dqp;
                kl_kh[kl_e] = __float2half_rn(kl_j < kl_len && kl_d < kl_dq ? kl_key(kl_r0 * kl_len + kl_j, kl_d) : 0.0f);
            }
            for (int kl_e = kl_t; kl_e < 32 * kl_dvp; kl_e += 256) {
                const long long kl_j = kl_j0 + kl_e / kl_dvp;
                const int kl_c = kl_e % kl_dvp;
                kl_vh[kl_e] = __float2half_rn(kl_j < kl_len && kl_c < kl_dv ? kl_term(kl_r0 * kl_dv + kl_c, kl_j) : 0.0f);
            }
        }
        __syncthreads();
        if (kl_uni && kl_qok && kl_warp < 4) {
            const int kl_wr = kl_warp / 2, kl_wc = kl_warp % 2;
            nvcuda::wmma::fragment<nvcuda::wmma::accumulator, 16, 16, 16, float> kl_acc;
            nvcuda::wmma::fill_fragment(kl_acc, 0.0f);
            for (int kl_kk = 0; kl_kk < kl_dqp; kl_kk += 16) {
                nvcuda::wmma::fragment<nvcuda::wmma::matrix_a, 16, 16, 16, __half, nvcuda::wmma::row_major> kl_a;
                nvcuda::wmma::fragment<nvcuda::wmma::matrix_b, 16, 16, 16, __half, nvcuda::wmma::col_major> kl_b;
                nvcuda::wmma::load_matrix_sync(kl_a, kl_qh + kl_wr * 16 * kl_dqp + kl_kk, kl_dqp);
                nvcuda::wmma::load_matrix_sync(kl_b, kl_kh + kl_wc * 16 * kl_dqp + kl_kk, kl_dqp);
                nvcuda::wmma::mma_sync(kl_acc, kl_a, kl_b, kl_acc);
            }
            nvcuda::wmma::store_matrix_sync(kl_sc + kl_wr * 16 * 32 + kl_wc * 16, kl_acc, 32, nvcuda::wmma::mem_row_major);
        }
        __syncthreads();
        for (int kl_e = kl_t; kl_e < 1024; kl_e += 256) {
            const int kl_rr = kl_e / 32, kl_jj = kl_e % 32;
            float* kl_s = &kl_ps[kl_rr * 33 + kl_jj];
            if (*kl_s == -INFINITY) continue;
            const long long kl_x = (kl_r0 + kl_rr) * kl_len + kl_j0 + kl_jj;
            *kl_s = kl_uni && kl_qok ? kl_val(kl_x, kl_sc[kl_e]) : kl_direct(kl_x);
        }
        __syncthreads();
        for (int kl_rr = kl_warp; kl_rr < 32; kl_rr += 8) {
            const float kl_s = kl_ps[kl_rr * 33 + kl_lane];
            float kl_mt = kl_s;
            for (int kl_o = 16; kl_o > 0; kl_o >>= 1) kl_mt = fmaxf(kl_mt, __shfl_xor_sync(0xffffffffu, kl_mt, kl_o));
            const float kl_mo = kl_m[kl_rr], kl_mn = fmaxf(kl_mo, kl_mt);
            const float kl_p = kl_s == -INFINITY ? 0.0f : expf(kl_s - kl_mn);
            float kl_sum = kl_p;
            for (int kl_o = 16; kl_o > 0; kl_o >>= 1) kl_sum += __shfl_xor_sync(0xffffffffu, kl_sum, kl_o);
            kl_ps[kl_rr * 33 + kl_lane] = kl_p;
            kl_ph[kl_rr * 32 + kl_lane] = __float2half_rn(kl_p);
            __syncwarp();
            if (kl_lane == 0) {
                const float kl_a = kl_mn == -INFINITY ? 1.0f : expf(kl_mo - kl_mn);
                kl_al[kl_rr] = kl_a;
                kl_l[kl_rr] = kl_l[kl_rr] * kl_a + kl_sum;
                kl_m[kl_rr] = kl_mn;
            }
        }
        __syncthreads();
        if (kl_uni) {
            for (int kl_e = kl_t; kl_e < 32 * kl_dvp; kl_e += 256) kl_os[kl_e] *= kl_al[kl_e / kl_dvp];
            __syncthreads();
            for (int kl_tile = kl_warp; kl_tile < 2 * (kl_dvp / 16); kl_tile += 8) {
                const int kl_wr = kl_tile / (kl_dvp / 16), kl_wc = kl_tile % (kl_dvp / 16);
                float* kl_o = kl_os + kl_wr * 16 * kl_dvp + kl_wc * 16;
                nvcuda::wmma::fragment<nvcuda::wmma::accumulator, 16, 16, 16, float> kl_acc;
                nvcuda::wmma::load_matrix_sync(kl_acc, kl_o, kl_dvp, nvcuda::wmma::mem_row_major);
                for (int kl_kk = 0; kl_kk < 32; kl_kk += 16) {
                    nvcuda::wmma::fragment<nvcuda::wmma::matrix_a, 16, 16, 16, __half, nvcuda::wmma::row_major> kl_a;
                    nvcuda::wmma::fragment<nvcuda::wmma::matrix_b, 16, 16, 16, __half, nvcuda::wmma::row_major> kl_b;
                    nvcuda::wmma::load_matrix_sync(kl_a, kl_ph + kl_wr * 16 * 32 + kl_kk, 32);
                    nvcuda::wmma::load_matrix_sync(kl_b, kl_vh + kl_kk * kl_dvp + kl_wc * 16, kl_dvp);
                    nvcuda::wmma::mma_sync(kl_acc, kl_a, kl_b, kl_acc);
                }
                nvcuda::wmma::store_matrix_sync(kl_o, kl_acc, kl_dvp, nvcuda::wmma::mem_row_major);
            }
        } else {
            for (int kl_e = kl_t; kl_e < 32 * kl_dv; kl_e += 256) {
                const int kl_rr = kl_e / kl_dv, kl_c = kl_e % kl_dv;
                const float* kl_w = &kl_ps[kl_rr * 33];
                float kl_a = kl_os[kl_rr * kl_dvp + kl_c] * kl_al[kl_rr];
                for (int kl_jj = 0; kl_jj < 32 && kl_j0 + kl_jj < kl_len; ++kl_jj)
                    if (kl_w[kl_jj] != 0.0f) kl_a += kl_w[kl_jj] * kl_term((kl_r0 + kl_rr) * kl_dv + kl_c, kl_j0 + kl_jj);
                kl_os[kl_rr * kl_dvp + kl_c] = kl_a;
            }
        }
        __syncthreads();
    }
    for (int kl_e = kl_t; kl_e < 32 * kl_dv; kl_e += 256) {
        const long long kl_r = kl_r0 + kl_e / kl_dv;
        if (kl_rowok(kl_r)) kl_out(kl_r * kl_dv + kl_e % kl_dv, kl_os[(kl_e / kl_dv) * kl_dvp + kl_e % kl_dv] / kl_l[kl_e / kl_dv]);
    }
}




extern "C" void launch(const __half* Q, const __half* K, const __half* V, __half* O, float* P, int B, int H,
                       int S, int D, int causal, cudaStream_t stream) {
    const int BH = B * H;
    const float scale = 1.0f / sqrtf((float)D);
    const int T = 256;
    long long n1 = (long long)BH * S * S, n2 = (long long)BH * S, n3 = (long long)BH * S * D;
    {
        const size_t kl_smem = (size_t)((32 * ((D + 15) / 16 * 16) + 1024 + 1056 + 96) * 4 + (32 * ((D + 15) / 16 * 16) + 32 * ((D + 15) / 16 * 16) + 32 * ((D + 15) / 16 * 16) + 1024) * 2);
        cudaFuncSetAttribute(attn_scores_flash, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)kl_smem);
        attn_scores_flash<<<(unsigned)(((BH*S) + 31) / 32), 256, kl_smem, stream>>>(Q, K, BH, S, D, causal, scale, V, O);
    }
}
