#include <mma.h>
// attention_gqa, naive: grouped-query cross attention in three phases through the fp32 scratch
// P (B, H, Sq, Sk): scores (one thread per score), softmax (one thread per row), weighted sum
// (one thread per output element). Query head h reads key/value head h / (H / G).
#include <cuda_runtime.h>
#include <cuda_fp16.h>
#include <math.h>

__global__ void gqa_scores_flash(const __half* Q, const __half* K, int B, int H, int G, int Sq, int Sk, int D, float scale, int rows, const __half* V, __half* O) {
    extern __shared__ __align__(128) unsigned char kl_tsm[];
    auto kl_rowok = [&](long long r) -> bool {

        return !((r >= rows));
    };
    auto kl_qry = [&](long long idx, int d) -> float {
        if (idx >= (long long)B * H * Sq * Sk) return 0.0f;
        int j = (int)(idx % Sk);
        long long row = idx / Sk;
        long long bh = row / Sq;
        long long bg = (bh / H) * G + (bh % H) / (H / G);
        return __half2float(Q[row * D + d]);
    };
    auto kl_key = [&](long long idx, int d) -> float {
        if (idx >= (long long)B * H * Sq * Sk) return 0.0f;
        int j = (int)(idx % Sk);
        long long row = idx / Sk;
        long long bh = row / Sq;
        long long bg = (bh / H) * G + (bh % H) / (H / G);
        return __half2float(K[(bg * Sk + j) * D + d]);
    };
    auto kl_qadr = [&](long long idx) -> const void* {
        if (idx >= (long long)B * H * Sq * Sk) return nullptr;
        int j = (int)(idx % Sk);
        long long row = idx / Sk;
        long long bh = row / Sq;
        long long bg = (bh / H) * G + (bh % H) / (H / G);
        const int d = 0;
        return (const void*)&(Q[row * D + d]);
    };
    auto kl_kadr = [&](long long idx) -> const void* {
        if (idx >= (long long)B * H * Sq * Sk) return nullptr;
        int j = (int)(idx % Sk);
        long long row = idx / Sk;
        long long bh = row / Sq;
        long long bg = (bh / H) * G + (bh % H) / (H / G);
        const int d = 0;
        return (const void*)&(K[(bg * Sk + j) * D + d]);
    };
    auto kl_val = [&](long long idx, float acc) -> float {
        if (idx >= (long long)B * H * Sq * Sk) return -INFINITY;
        int j = (int)(idx % Sk);
        long long row = idx / Sk;
        long long bh = row / Sq;
        long long bg = (bh / H) * G + (bh % H) / (H / G);
        return acc * scale;
    };
    auto kl_direct = [&](long long idx) -> float {
        if (idx >= (long long)B * H * Sq * Sk) return -INFINITY;
        int j = (int)(idx % Sk);
        long long row = idx / Sk;
        long long bh = row / Sq;
        long long bg = (bh / H) * G + (bh % H) / (H / G);
        float acc = 0.0f;
        for (int d = 0; d < D; ++d) acc += __half2float(Q[row * D + d]) * __half2float(K[(bg * Sk + j) * D + d]);
        return acc * scale;
    };
    auto kl_term = [&](long long idx, int j) -> float {
        if (idx >= (long long)B * H * Sq * D) return 0.0f;
        int d = (int)(idx % D);
        long long row = idx / D;
        long long bh = row / Sq;
        long long bg = (bh / H) * G + (bh % H) / (H / G);
        return __half2float(V[(bg * Sk + j) * D + d]);
    };
    auto kl_vadr = [&](long long idx, int j) -> const void* {
        if (idx >= (long long)B * H * Sq * D) return nullptr;
        int d = (int)(idx % D);
        long long row = idx / D;
        long long bh = row / Sq;
        long long bg = (bh / H) * G + (bh % H) / (H / G);
        return (const void*)&(V[(bg * Sk + j) * D + d]);
    };
    auto kl_out = [&](long long idx, float acc) -> void {
        if (idx >= (long long)B * H * Sq * D) return;
        int d = (int)(idx % D);
        long long row = idx / D;
        long long bh = row / Sq;
        long long bg = (bh / H) * G + (bh % H) / (H / G);
        O[idx] = __float2half_rn(acc);
    };
    auto kl_qat = [&](long long idx, int d) -> const void* {
        if (idx >= (long long)B * H * Sq * Sk) return nullptr;
        int j = (int)(idx % Sk);
        long long row = idx / Sk;
        long long bh = row / Sq;
        long long bg = (bh / H) * G + (bh % H) / (H / G);
        return (const void*)&(Q[row * D + d]);
    };
    auto kl_kat = [&](long long idx, int d) -> const void* {
        if (idx >= (long long)B * H * Sq * Sk) return nullptr;
        int j = (int)(idx % Sk);
        long long row = idx / Sk;
        long long bh = row / Sq;
        long long bg = (bh / H) * G + (bh % H) / (H / G);
        return (const void*)&(K[(bg * Sk + j) * D + d]);
    };
    const int kl_dq = (int)(D);
    const int kl_dv = (int)(D);
    const int kl_dqp = (kl_dq + 15) / 16 * 16, kl_dvp = (kl_dv + 15) / 16 * 16;
    const int kl_dqs = kl_dqp + 8, kl_dvs = kl_dvp + 8, kl_dos = kl_dvp + 4;  // padded row strides
    const int kl_vec = kl_dq % 8 == 0 && kl_dv % 8 == 0;
    const long long kl_len = (long long)(Sk);
    const long long kl_r0 = (long long)blockIdx.x * 64;
    auto kl_vrk = [&](long long kl_ar, long long kl_aj, float acc) -> float {
        const long long idx = (long long)(kl_ar * kl_len + kl_aj);
        if (idx >= (long long)B * H * Sq * Sk) return -INFINITY;
        int j = (int)(((decltype(idx % Sk))kl_aj));
        long long row = ((decltype(idx / Sk))kl_ar);
        long long bh = row / Sq;
        long long bg = (bh / H) * G + (bh % H) / (H / G);
        return acc * scale;
    };
    auto kl_kark = [&](long long kl_ar, long long kl_aj, int d) -> const void* {
        const long long idx = (long long)(kl_ar * kl_len + kl_aj);
        if (idx >= (long long)B * H * Sq * Sk) return nullptr;
        int j = (int)(((decltype(idx % Sk))kl_aj));
        long long row = ((decltype(idx / Sk))kl_ar);
        long long bh = row / Sq;
        long long bg = (bh / H) * G + (bh % H) / (H / G);
        return (const void*)&(K[(bg * Sk + j) * D + d]);
    };
    auto kl_vark = [&](long long kl_ar, long long kl_aj, int j) -> const void* {
        const long long idx = (long long)(kl_ar * kl_dv + kl_aj);
        if (idx >= (long long)B * H * Sq * D) return nullptr;
        int d = (int)(((decltype(idx % D))kl_aj));
        long long row = ((decltype(idx / D))kl_ar);
        long long bh = row / Sq;
        long long bg = (bh / H) * G + (bh % H) / (H / G);
        return (const void*)&(V[(bg * Sk + j) * D + d]);
    };
    float* kl_os = reinterpret_cast<float*>(kl_tsm);
    float* kl_sc = kl_os + 64 * kl_dos;
    float* kl_m = kl_sc + 4352;
    float* kl_l = kl_m + 64;
    float* kl_al = kl_l + 64;
    const __half** kl_kp = reinterpret_cast<const __half**>(kl_al + 64);
    const __half** kl_vp = kl_kp + 64;
    __half* kl_qh = reinterpret_cast<__half*>(kl_vp + 64);
    __half* kl_kh = kl_qh + 64 * kl_dqs;
    __half* kl_vh = kl_kh + 64 * kl_dqs;
    __half* kl_ph = kl_vh + 64 * kl_dvs;
    const int kl_t = threadIdx.x, kl_lane = kl_t % 32, kl_warp = kl_t / 32;
    for (int kl_e = kl_t; kl_e < 64; kl_e += 128) {
        kl_m[kl_e] = -INFINITY;
        kl_l[kl_e] = 0.0f;
    }
    for (int kl_e = kl_t; kl_e < 64 * kl_dos; kl_e += 128) kl_os[kl_e] = 0.0f;
    int kl_qok = 1;
    if (kl_t < 64 && kl_rowok(kl_r0 + kl_t))
        kl_qok = kl_qadr((kl_r0 + kl_t) * kl_len) == kl_qadr((kl_r0 + kl_t) * kl_len + kl_len - 1);
    kl_qok = __syncthreads_and(kl_qok);
    const int kl_w0 = kl_warp * 16;  // the warp's first query row in the tile
    if (kl_qok) {
        int kl_cont = 1, kl_a16 = 1;
        if (kl_t < 64) {
            {
                const __half* kl_ptr = nullptr;
                if (kl_rowok(kl_r0 + kl_t)) {
                    kl_ptr = (const __half*)kl_qat((kl_r0 + kl_t) * kl_len, 0);
                    kl_cont &= kl_ptr != nullptr && (const __half*)kl_qat((kl_r0 + kl_t) * kl_len, kl_dq - 1) == kl_ptr + (kl_dq - 1);
                    kl_a16 &= (reinterpret_cast<unsigned long long>(kl_ptr) & 15ull) == 0;
                }
                kl_kp[kl_t] = kl_ptr;
            }
        }
        kl_cont = __syncthreads_and(kl_cont);
        kl_a16 = __syncthreads_and(kl_a16);
        {
            if (kl_cont && kl_a16 && kl_vec) {
                for (int kl_e = kl_t; kl_e < 64 * (kl_dqp / 8); kl_e += 128) {
                    const int kl_i = kl_e / (kl_dqp / 8), kl_c = kl_e % (kl_dqp / 8) * 8;
                    uint4 kl_u = make_uint4(0u, 0u, 0u, 0u);
                    if (kl_kp[kl_i] != nullptr && kl_c < kl_dq) kl_u = *reinterpret_cast<const uint4*>(kl_kp[kl_i] + kl_c);
                    *reinterpret_cast<uint4*>(kl_qh + kl_i * (kl_dqp + 8) + kl_c) = kl_u;
                }
            } else if (kl_cont) {
                for (int kl_e = kl_t; kl_e < 64 * kl_dqp; kl_e += 128) {
                    const int kl_i = kl_e / kl_dqp, kl_c = kl_e % kl_dqp;
                    kl_qh[kl_i * (kl_dqp + 8) + kl_c] = kl_kp[kl_i] != nullptr && kl_c < kl_dq ? kl_kp[kl_i][kl_c] : __float2half_rn(0.0f);
                }
            } else {
                for (int kl_e = kl_t; kl_e < 64 * kl_dqp; kl_e += 128) {
                    const int kl_i = kl_e / kl_dqp, kl_c = kl_e % kl_dqp;
                    kl_qh[kl_i * (kl_dqp + 8) + kl_c] = __float2half_rn(kl_c < kl_dq && kl_rowok(kl_r0 + kl_i) ? kl_qry((kl_r0 + kl_i) * kl_len, kl_c) : 0.0f);
                }
            }
        }
    }
    const bool kl_oreg = kl_dvp <= 128;
    nvcuda::wmma::fragment<nvcuda::wmma::accumulator, 16, 16, 16, float> kl_oacc[8], kl_rid;
    #pragma unroll
    for (int kl_f = 0; kl_f < 8; ++kl_f) nvcuda::wmma::fill_fragment(kl_oacc[kl_f], 0.0f);
    for (int kl_e = kl_lane; kl_e < 256; kl_e += 32) kl_sc[(kl_w0 + kl_e / 16) * 68 + kl_e % 16] = (float)(kl_e / 16);
    __syncwarp();
    nvcuda::wmma::load_matrix_sync(kl_rid, kl_sc + kl_w0 * 68, 68, nvcuda::wmma::mem_row_major);
    __syncwarp();
    __syncthreads();
    for (long long kl_j0 = 0; kl_j0 < kl_len; kl_j0 += 64) {
        const long long kl_jl = min(kl_j0 + 63, kl_len - 1);
        int kl_uni = 1, kl_cont = 1, kl_a16 = 1;
        if (kl_t < 64 && kl_rowok(kl_r0 + kl_t)) {
            const long long kl_r = kl_r0 + kl_t;
            kl_uni = kl_kark(kl_r, kl_j0, 0) == kl_kark(kl_r0, kl_j0, 0) &&
                     kl_kark(kl_r, kl_jl, 0) == kl_kark(kl_r0, kl_jl, 0) &&
                     kl_vark(kl_r, 0, kl_j0) == kl_vark(kl_r0, 0, kl_j0) &&
                     kl_vark(kl_r, kl_dv - 1, kl_jl) == kl_vark(kl_r0, kl_dv - 1, kl_jl);
        }
        kl_uni = __syncthreads_and(kl_uni);
        if (kl_t >= 64) {
            const int kl_jj = kl_t - 64;
            {
                const __half* kl_ptr = nullptr;
                if (kl_j0 + kl_jj < kl_len) {
                    kl_ptr = (const __half*)kl_kark(kl_r0, kl_j0 + kl_jj, 0);
                    kl_cont &= kl_ptr != nullptr && (const __half*)kl_kark(kl_r0, kl_j0 + kl_jj, kl_dq - 1) == kl_ptr + (kl_dq - 1);
                    kl_a16 &= (reinterpret_cast<unsigned long long>(kl_ptr) & 15ull) == 0;
                }
                kl_kp[kl_jj] = kl_ptr;
            }
            {
                const __half* kl_ptr = nullptr;
                if (kl_j0 + kl_jj < kl_len) {
                    kl_ptr = (const __half*)kl_vark(kl_r0, 0, kl_j0 + kl_jj);
                    kl_cont &= kl_ptr != nullptr && (const __half*)kl_vark(kl_r0, kl_dv - 1, kl_j0 + kl_jj) == kl_ptr + (kl_dv - 1);
                    kl_a16 &= (reinterpret_cast<unsigned long long>(kl_ptr) & 15ull) == 0;
                }
                kl_vp[kl_jj] = kl_ptr;
            }
        }
        kl_cont = __syncthreads_and(kl_cont);
        kl_a16 = __syncthreads_and(kl_a16);
        if (kl_uni) {
            if (kl_cont && kl_a16 && kl_vec) {
                for (int kl_e = kl_t; kl_e < 64 * (kl_dqp / 8); kl_e += 128) {
                    const int kl_i = kl_e / (kl_dqp / 8), kl_c = kl_e % (kl_dqp / 8) * 8;
                    uint4 kl_u = make_uint4(0u, 0u, 0u, 0u);
                    if (kl_kp[kl_i] != nullptr && kl_c < kl_dq) kl_u = *reinterpret_cast<const uint4*>(kl_kp[kl_i] + kl_c);
                    *reinterpret_cast<uint4*>(kl_kh + kl_i * (kl_dqp + 8) + kl_c) = kl_u;
                }
            } else if (kl_cont) {
                for (int kl_e = kl_t; kl_e < 64 * kl_dqp; kl_e += 128) {
                    const int kl_i = kl_e / kl_dqp, kl_c = kl_e % kl_dqp;
                    kl_kh[kl_i * (kl_dqp + 8) + kl_c] = kl_kp[kl_i] != nullptr && kl_c < kl_dq ? kl_kp[kl_i][kl_c] : __float2half_rn(0.0f);
                }
            } else {
                for (int kl_e = kl_t; kl_e < 64 * kl_dqp; kl_e += 128) {
                    const int kl_i = kl_e / kl_dqp, kl_c = kl_e % kl_dqp;
                    kl_kh[kl_i * (kl_dqp + 8) + kl_c] = __float2half_rn(kl_c < kl_dq && kl_j0 + kl_i < kl_len ? kl_key(kl_r0 * kl_len + kl_j0 + kl_i, kl_c) : 0.0f);
                }
            }
            if (kl_cont && kl_a16 && kl_vec) {
                for (int kl_e = kl_t; kl_e < 64 * (kl_dvp / 8); kl_e += 128) {
                    const int kl_i = kl_e / (kl_dvp / 8), kl_c = kl_e % (kl_dvp / 8) * 8;
                    uint4 kl_u = make_uint4(0u, 0u, 0u, 0u);
                    if (kl_vp[kl_i] != nullptr && kl_c < kl_dv) kl_u = *reinterpret_cast<const uint4*>(kl_vp[kl_i] + kl_c);
                    *reinterpret_cast<uint4*>(kl_vh + kl_i * (kl_dvp + 8) + kl_c) = kl_u;
                }
            } else if (kl_cont) {
                for (int kl_e = kl_t; kl_e < 64 * kl_dvp; kl_e += 128) {
                    const int kl_i = kl_e / kl_dvp, kl_c = kl_e % kl_dvp;
                    kl_vh[kl_i * (kl_dvp + 8) + kl_c] = kl_vp[kl_i] != nullptr && kl_c < kl_dv ? kl_vp[kl_i][kl_c] : __float2half_rn(0.0f);
                }
            } else {
                for (int kl_e = kl_t; kl_e < 64 * kl_dvp; kl_e += 128) {
                    const int kl_i = kl_e / kl_dvp, kl_c = kl_e % kl_dvp;
                    kl_vh[kl_i * (kl_dvp + 8) + kl_c] = __float2half_rn(kl_c < kl_dv && kl_j0 + kl_i < kl_len ? kl_term(kl_r0 * kl_dv + kl_c, kl_j0 + kl_i) : 0.0f);
                }
            }
        }
        __syncthreads();
        if (kl_uni && kl_qok) {
            nvcuda::wmma::fragment<nvcuda::wmma::accumulator, 16, 16, 16, float> kl_acc[4];
            #pragma unroll
            for (int kl_f = 0; kl_f < 4; ++kl_f) nvcuda::wmma::fill_fragment(kl_acc[kl_f], 0.0f);
            for (int kl_kk = 0; kl_kk < kl_dqp; kl_kk += 16) {
                nvcuda::wmma::fragment<nvcuda::wmma::matrix_a, 16, 16, 16, __half, nvcuda::wmma::row_major> kl_a;
                nvcuda::wmma::load_matrix_sync(kl_a, kl_qh + kl_w0 * kl_dqs + kl_kk, kl_dqs);
                #pragma unroll
                for (int kl_f = 0; kl_f < 4; ++kl_f) {
                    nvcuda::wmma::fragment<nvcuda::wmma::matrix_b, 16, 16, 16, __half, nvcuda::wmma::col_major> kl_b;
                    nvcuda::wmma::load_matrix_sync(kl_b, kl_kh + kl_f * 16 * kl_dqs + kl_kk, kl_dqs);
                    nvcuda::wmma::mma_sync(kl_acc[kl_f], kl_a, kl_b, kl_acc[kl_f]);
                }
            }
            #pragma unroll
            for (int kl_f = 0; kl_f < 4; ++kl_f)
                nvcuda::wmma::store_matrix_sync(kl_sc + kl_w0 * 68 + kl_f * 16, kl_acc[kl_f], 68, nvcuda::wmma::mem_row_major);
        }
        __syncwarp();
        const int kl_rr = kl_w0 + kl_lane / 2, kl_h = kl_lane % 2;
        const long long kl_r = kl_r0 + kl_rr;
        const bool kl_rok = kl_rowok(kl_r);
        float* kl_row = &kl_sc[kl_rr * 68];
        float kl_mt = -INFINITY;
        for (int kl_jj = kl_h; kl_jj < 64; kl_jj += 2) {
            const long long kl_j = kl_j0 + kl_jj, kl_x = kl_r * kl_len + kl_j;
            float kl_v = -INFINITY;
            if (kl_rok && kl_j < kl_len) {
                if (kl_uni && kl_qok) {
                    const float kl_d = kl_row[kl_jj];
                    kl_v = kl_vrk(kl_r, kl_j, kl_d);
                } else if (!(kl_val(kl_x, 0.0f) == -INFINITY && kl_val(kl_x, 1.0f) == -INFINITY)) {
                    kl_v = kl_direct(kl_x);
                }
            }
            kl_row[kl_jj] = kl_v;
            kl_mt = fmaxf(kl_mt, kl_v);
        }
        kl_mt = fmaxf(kl_mt, __shfl_xor_sync(0xffffffffu, kl_mt, 1));
        const int kl_live = __any_sync(0xffffffffu, kl_mt != -INFINITY);
        const float kl_mo = kl_m[kl_rr], kl_mn = fmaxf(kl_mo, kl_mt);
        float kl_sum = 0.0f;
        for (int kl_jj = kl_h; kl_jj < 64; kl_jj += 2) {
            const float kl_s = kl_row[kl_jj];
            const float kl_p = kl_s == -INFINITY ? 0.0f : expf(kl_s - kl_mn);
            kl_sum += kl_p;
            kl_row[kl_jj] = kl_p;
            kl_ph[kl_rr * 72 + kl_jj] = __float2half_rn(kl_p);
        }
        kl_sum += __shfl_xor_sync(0xffffffffu, kl_sum, 1);
        if (kl_h == 0) {
            const float kl_a = kl_mn == -INFINITY ? 1.0f : expf(kl_mo - kl_mn);
            kl_al[kl_rr] = kl_a;
            kl_l[kl_rr] = kl_l[kl_rr] * kl_a + kl_sum;
            kl_m[kl_rr] = kl_mn;
        }
        __syncwarp();
        if (kl_live) {
            if (kl_uni) {
                nvcuda::wmma::fragment<nvcuda::wmma::matrix_a, 16, 16, 16, __half, nvcuda::wmma::row_major> kl_pa[4];
                #pragma unroll
                for (int kl_f = 0; kl_f < 4; ++kl_f) nvcuda::wmma::load_matrix_sync(kl_pa[kl_f], kl_ph + kl_w0 * 72 + kl_f * 16, 72);
                if (kl_oreg) {
                    if (__any_sync(0xffffffffu, kl_lane < 16 && kl_al[kl_w0 + kl_lane] != 1.0f)) {
                        float kl_ai[sizeof(kl_rid.x) / sizeof(float)];
                        #pragma unroll
                        for (int kl_i = 0; kl_i < (int)(sizeof(kl_rid.x) / sizeof(float)); ++kl_i) kl_ai[kl_i] = kl_al[kl_w0 + (int)kl_rid.x[kl_i]];
                        #pragma unroll
                        for (int kl_f = 0; kl_f < 8; ++kl_f)
                            #pragma unroll
                            for (int kl_i = 0; kl_i < (int)(sizeof(kl_rid.x) / sizeof(float)); ++kl_i) kl_oacc[kl_f].x[kl_i] *= kl_ai[kl_i];
                    }
                    #pragma unroll
                    for (int kl_c = 0; kl_c < 8; ++kl_c) {
                        if (kl_c * 16 >= kl_dvp) break;
                        #pragma unroll
                        for (int kl_f = 0; kl_f < 4; ++kl_f) {
                            nvcuda::wmma::fragment<nvcuda::wmma::matrix_b, 16, 16, 16, __half, nvcuda::wmma::row_major> kl_b;
                            nvcuda::wmma::load_matrix_sync(kl_b, kl_vh + kl_f * 16 * kl_dvs + kl_c * 16, kl_dvs);
                            nvcuda::wmma::mma_sync(kl_oacc[kl_c], kl_pa[kl_f], kl_b, kl_oacc[kl_c]);
                        }
                    }
                } else {
                    for (int kl_i = 0; kl_i < 16; ++kl_i) {
                        const float kl_a = kl_al[kl_w0 + kl_i];
                        if (kl_a != 1.0f)
                            for (int kl_c = kl_lane; kl_c < kl_dvp; kl_c += 32) kl_os[(kl_w0 + kl_i) * kl_dos + kl_c] *= kl_a;
                    }
                    __syncwarp();
                    for (int kl_c = 0; kl_c < kl_dvp; kl_c += 16) {
                        float* kl_o = kl_os + kl_w0 * kl_dos + kl_c;
                        nvcuda::wmma::fragment<nvcuda::wmma::accumulator, 16, 16, 16, float> kl_acc;
                        nvcuda::wmma::load_matrix_sync(kl_acc, kl_o, kl_dos, nvcuda::wmma::mem_row_major);
                        #pragma unroll
                        for (int kl_f = 0; kl_f < 4; ++kl_f) {
                            nvcuda::wmma::fragment<nvcuda::wmma::matrix_b, 16, 16, 16, __half, nvcuda::wmma::row_major> kl_b;
                            nvcuda::wmma::load_matrix_sync(kl_b, kl_vh + kl_f * 16 * kl_dvs + kl_c, kl_dvs);
                            nvcuda::wmma::mma_sync(kl_acc, kl_pa[kl_f], kl_b, kl_acc);
                        }
                        nvcuda::wmma::store_matrix_sync(kl_o, kl_acc, kl_dos, nvcuda::wmma::mem_row_major);
                    }
                }
            } else {
                if (kl_oreg) {
        #pragma unroll
        for (int kl_f = 0; kl_f < 8; ++kl_f)
            if (kl_f * 16 < kl_dvp) nvcuda::wmma::store_matrix_sync(kl_os + kl_w0 * kl_dos + kl_f * 16, kl_oacc[kl_f], kl_dos, nvcuda::wmma::mem_row_major);
    }

                __syncwarp();
                for (int kl_e = kl_lane; kl_e < 16 * kl_dv; kl_e += 32) {
                    const int kl_rr = kl_w0 + kl_e / kl_dv, kl_c = kl_e % kl_dv;
                    const float* kl_w = &kl_sc[kl_rr * 68];
                    float kl_a = kl_os[kl_rr * kl_dos + kl_c] * kl_al[kl_rr];
                    for (int kl_jj = 0; kl_jj < 64 && kl_j0 + kl_jj < kl_len; ++kl_jj)
                        if (kl_w[kl_jj] != 0.0f) kl_a += kl_w[kl_jj] * kl_term((kl_r0 + kl_rr) * kl_dv + kl_c, kl_j0 + kl_jj);
                    kl_os[kl_rr * kl_dos + kl_c] = kl_a;
                }
                __syncwarp();
                if (kl_oreg) {
        #pragma unroll
        for (int kl_f = 0; kl_f < 8; ++kl_f)
            if (kl_f * 16 < kl_dvp) nvcuda::wmma::load_matrix_sync(kl_oacc[kl_f], kl_os + kl_w0 * kl_dos + kl_f * 16, kl_dos, nvcuda::wmma::mem_row_major);
    }

            }
        }
        __syncthreads();
    }
    if (kl_oreg) {
        #pragma unroll
        for (int kl_f = 0; kl_f < 8; ++kl_f)
            if (kl_f * 16 < kl_dvp) nvcuda::wmma::store_matrix_sync(kl_os + kl_w0 * kl_dos + kl_f * 16, kl_oacc[kl_f], kl_dos, nvcuda::wmma::mem_row_major);
    }

    __syncwarp();
    for (int kl_e = kl_lane; kl_e < 16 * kl_dv; kl_e += 32) {
        const int kl_rr = kl_w0 + kl_e / kl_dv, kl_c = kl_e % kl_dv;
        const long long kl_r = kl_r0 + kl_rr;
        if (kl_rowok(kl_r)) kl_out(kl_r * kl_dv + kl_c, kl_os[kl_rr * kl_dos + kl_c] / kl_l[kl_rr]);
    }
}




extern "C" void launch(const __half* Q, const __half* K, const __half* V, __half* O, float* P, int B, int H,
                       int G, int Sq, int Sk, int D, cudaStream_t stream) {
    const float scale = 1.0f / sqrtf((float)D);
    const int T = 256;
    const int rows = B * H * Sq;
    long long n1 = (long long)rows * Sk, n3 = (long long)rows * D;
    {
        const size_t kl_smem = (size_t)((64 * (((D + 15) / 16 * 16) + 4) + 4352 + 192) * 4 + 1024 + (64 * (((D + 15) / 16 * 16) + 8) + 64 * (((D + 15) / 16 * 16) + 8) + 64 * (((D + 15) / 16 * 16) + 8) + 4608) * 2);
        cudaFuncSetAttribute(gqa_scores_flash, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)kl_smem);
        gqa_scores_flash<<<(unsigned)((rows + 63) / 64), 128, kl_smem, stream>>>(Q, K, B, H, G, Sq, Sk, D, scale, rows, V, O);
    }
}
