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
    auto kl_qat = [&](long long idx, int d) -> const void* {
        long long total = (long long)BH * S * S;
        if (idx >= total) return nullptr;
        int j = (int)(idx % S);
        int i = (int)((idx / S) % S);
        long long bh = idx / ((long long)S * S);
        const __half* q = Q + (bh * S + i) * D;
        const __half* k = K + (bh * S + j) * D;
        return (const void*)&(q[d]);
    };
    auto kl_kat = [&](long long idx, int d) -> const void* {
        long long total = (long long)BH * S * S;
        if (idx >= total) return nullptr;
        int j = (int)(idx % S);
        int i = (int)((idx / S) % S);
        long long bh = idx / ((long long)S * S);
        const __half* q = Q + (bh * S + i) * D;
        const __half* k = K + (bh * S + j) * D;
        return (const void*)&(k[d]);
    };
    const int kl_dq = (int)(D);
    const int kl_dv = (int)(D);
    const int kl_dqp = (kl_dq + 15) / 16 * 16, kl_dvp = (kl_dv + 15) / 16 * 16;
    const int kl_dqs = kl_dqp + 8, kl_dvs = kl_dvp + 8, kl_dos = kl_dvp + 4;  // padded row strides
    const int kl_vec = kl_dq % 8 == 0 && kl_dv % 8 == 0;
    const bool kl_oreg = kl_dvp <= 128;  // the output tile lives in registers
    const int kl_nst = (((4352 + (kl_dvp > 128 ? 64 * (kl_dvp + 4) : 0)) * 4 + 2048 + (64 * (kl_dqp + 8) + 2 * 64 * (kl_dqp + 8 + kl_dvp + 8)) * 2) <= 232448 ? 2 : 1);  // K/V stages
    const long long kl_len = (long long)(S);
    const long long kl_r0 = (long long)blockIdx.x * 64;
    auto kl_vrk = [&](long long kl_ar, long long kl_aj, long long kl_am, float acc) -> float {
        const long long idx = (long long)(kl_ar * kl_len + kl_aj);
        long long total = (long long)BH * S * S;
        if (idx >= total) return -INFINITY;
        int j = (int)(((decltype(idx % S))kl_aj));
        int i = (int)(((decltype((((decltype(idx / S))kl_ar)) % S))kl_am));
        long long bh = ((decltype(idx / ((long long)S * S)))(kl_ar / S));
        const __half* q = Q + (bh * S + i) * D;
        const __half* k = K + (bh * S + j) * D;
        return (causal && j > i) ? -INFINITY : acc * scale;
    };
    auto kl_kark = [&](long long kl_ar, long long kl_aj, int d) -> const void* {
        const long long idx = (long long)(kl_ar * kl_len + kl_aj);
        long long total = (long long)BH * S * S;
        if (idx >= total) return nullptr;
        int j = (int)(((decltype(idx % S))kl_aj));
        int i = (int)((((decltype(idx / S))kl_ar)) % S);
        long long bh = ((decltype(idx / ((long long)S * S)))(kl_ar / S));
        const __half* q = Q + (bh * S + i) * D;
        const __half* k = K + (bh * S + j) * D;
        return (const void*)&(k[d]);
    };
    auto kl_vark = [&](long long kl_ar, long long kl_aj, int j) -> const void* {
        const long long idx = (long long)(kl_ar * kl_dv + kl_aj);
        if (idx >= (long long)BH * S * D) return nullptr;
        int d = (int)(((decltype(idx % D))kl_aj));
        long long row = ((decltype(idx / D))kl_ar);
        long long bh = row / S;
        return (const void*)&(V[(bh * S + j) * D + d]);
    };
    float* kl_sc = reinterpret_cast<float*>(kl_tsm);
    float* kl_os = kl_sc + 4352;
    const __half** kl_kp = reinterpret_cast<const __half**>(kl_os + (kl_oreg ? 0 : 64 * kl_dos));
    const __half** kl_vp = kl_kp + 128;
    __half* kl_qh = reinterpret_cast<__half*>(kl_vp + 128);
    __half* kl_kh = kl_qh + 64 * kl_dqs;
    __half* kl_vh = kl_kh + kl_nst * 64 * kl_dqs;
    const int kl_t = threadIdx.x, kl_lane = kl_t % 32, kl_warp = kl_t / 32;
    const int kl_w0 = kl_warp * 16;  // the warp's first query row in the tile
    const int kl_g = kl_lane / 4, kl_c2 = kl_lane % 4 * 2;  // mma.sync fragment: row group, column pair
    const int kl_lr = (kl_lane & 7) + ((kl_lane >> 3) & 1) * 8, kl_lc = (kl_lane >> 4) * 8;  // ldmatrix A / V^T rows
    const int kl_kr = (kl_lane & 7) + (kl_lane >> 4) * 8, kl_kc = ((kl_lane >> 3) & 1) * 8;  // ldmatrix K rows
    if (!kl_oreg)
        for (int kl_e = kl_t; kl_e < 64 * kl_dos; kl_e += 128) kl_os[kl_e] = 0.0f;
    int kl_qok = 1;
    if (kl_t < 64 && kl_rowok(kl_r0 + kl_t))
        kl_qok = kl_qadr((kl_r0 + kl_t) * kl_len) == kl_qadr((kl_r0 + kl_t) * kl_len + kl_len - 1);
    kl_qok = __syncthreads_and(kl_qok);
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
                    auto* kl_dst = kl_qh + kl_i * (kl_dqp + 8) + kl_c;
                    uint4 kl_u = make_uint4(0u, 0u, 0u, 0u);
                    if (kl_kp[kl_i] != nullptr && kl_c < kl_dq) kl_u = *reinterpret_cast<const uint4*>(kl_kp[kl_i] + kl_c);
                    *reinterpret_cast<uint4*>(kl_dst) = kl_u;
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
    __syncthreads();
    unsigned kl_qf[8][4];
    if (kl_qok) {
        #pragma unroll
        for (int kl_q = 0; kl_q < 8; ++kl_q)
            if (kl_q * 16 < kl_dqp) asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n" : "=r"(kl_qf[kl_q][0]), "=r"(kl_qf[kl_q][1]), "=r"(kl_qf[kl_q][2]), "=r"(kl_qf[kl_q][3]) : "r"((unsigned)__cvta_generic_to_shared(kl_qh + (kl_w0 + kl_lr) * kl_dqs + kl_q * 16 + kl_lc)));
    }
    const long long kl_ra = kl_r0 + kl_w0 + kl_g;  // the lane's rows: kl_ra and kl_ra + 8
    const bool kl_rk[2] = {kl_rowok(kl_ra), kl_rowok(kl_ra + 8)};
    const long long kl_rm[2] = {kl_rk[0] ? kl_ra % S : 0, kl_rk[1] ? (kl_ra + 8) % S : 0};  // the rows modulo S
    float kl_m[2] = {-INFINITY, -INFINITY}, kl_l[2] = {0.0f, 0.0f}, kl_o[16][4];
    #pragma unroll
    for (int kl_n = 0; kl_n < 16; ++kl_n)
        #pragma unroll
        for (int kl_e = 0; kl_e < 4; ++kl_e) kl_o[kl_n][kl_e] = 0.0f;
    int kl_saw = 0, kl_pu = 0, kl_pd = 1;  // a tile masked a whole row; the previous pass's tile: uniform, dead
    const long long kl_jb = -(long long)(kl_nst - 1) * 64;  // with two stages the first pass only stages
    for (long long kl_j0 = kl_jb; kl_j0 < kl_len; kl_j0 += 64) {
        const long long kl_jp = kl_j0 + (kl_nst - 1) * 64;  // the tile staged in this pass
        const int kl_sb = (int)(kl_jp / 64 % kl_nst);
        int kl_nu = 0, kl_nd = 1;
        if (kl_jp < kl_len) {
            const long long kl_j0 = kl_jp;  // the tile this pass stages (the loop's kl_j0 is the one it multiplies)
            const long long kl_jl = min(kl_j0 + 63, kl_len - 1);
            int kl_uni = 1, kl_cont = 1, kl_a16 = 1, kl_all = 1;
            const __half** kl_kq = kl_kp + kl_sb * 64;
            const __half** kl_vq = kl_vp + kl_sb * 64;
            __half* kl_kb = kl_kh + kl_sb * 64 * kl_dqs;
            __half* kl_vb = kl_vh + kl_sb * 64 * kl_dvs;
        if (kl_t < 64 && kl_rowok(kl_r0 + kl_t)) {
            const long long kl_r = kl_r0 + kl_t;
            kl_uni = kl_kark(kl_r, kl_j0, 0) == kl_kark(kl_r0, kl_j0, 0) &&
                     kl_kark(kl_r, kl_jl, 0) == kl_kark(kl_r0, kl_jl, 0) &&
                     kl_vark(kl_r, 0, kl_j0) == kl_vark(kl_r0, 0, kl_j0) &&
                     kl_vark(kl_r, kl_dv - 1, kl_jl) == kl_vark(kl_r0, kl_dv - 1, kl_jl);
        }
            if (kl_t >= 64) {
                const int kl_jj = kl_t - 64;
                {
                    const __half* kl_ptr = nullptr;
                    if (kl_j0 + kl_jj < kl_len) {
                        kl_ptr = (const __half*)kl_kark(kl_r0, kl_j0 + kl_jj, 0);
                        kl_cont &= kl_ptr != nullptr && (const __half*)kl_kark(kl_r0, kl_j0 + kl_jj, kl_dq - 1) == kl_ptr + (kl_dq - 1);
                        kl_a16 &= (reinterpret_cast<unsigned long long>(kl_ptr) & 15ull) == 0;
                    }
                    kl_kq[kl_jj] = kl_ptr;
                }
                {
                    const __half* kl_ptr = nullptr;
                    if (kl_j0 + kl_jj < kl_len) {
                        kl_ptr = (const __half*)kl_vark(kl_r0, 0, kl_j0 + kl_jj);
                        kl_cont &= kl_ptr != nullptr && (const __half*)kl_vark(kl_r0, kl_dv - 1, kl_j0 + kl_jj) == kl_ptr + (kl_dv - 1);
                        kl_a16 &= (reinterpret_cast<unsigned long long>(kl_ptr) & 15ull) == 0;
                    }
                    kl_vq[kl_jj] = kl_ptr;
                }
            }
            if (__syncthreads_count(kl_saw || !(kl_uni && kl_cont && kl_a16)) == 0) {
                kl_nu = 1;  // one barrier in the common case: the block's tile, contiguous rows, nothing masked yet
                kl_nd = 0;
            } else {
                kl_saw = __syncthreads_or(kl_saw);
                if (kl_saw) {
                    const long long kl_r = kl_r0 + kl_t / 2;
                    const bool kl_rok = kl_rowok(kl_r);
                    const long long kl_pm = kl_rok ? kl_r % S : 0;
                    for (int kl_jj = kl_t % 2; kl_jj < 64 && kl_all; kl_jj += 2) {
                        const long long kl_j = kl_j0 + kl_jj;
                        kl_all = !kl_rok || kl_j >= kl_len || (kl_vrk(kl_r, kl_j, kl_pm, 0.0f) == -INFINITY && kl_vrk(kl_r, kl_j, kl_pm, 1.0f) == -INFINITY);
                    }
                }
                kl_nd = kl_saw ? __syncthreads_and(kl_all) : 0;
                kl_nu = __syncthreads_and(kl_uni);
                kl_cont = __syncthreads_and(kl_cont);
                kl_a16 = __syncthreads_and(kl_a16);
            }
            if (kl_nu && !kl_nd) {
            if (kl_cont && kl_a16 && kl_vec) {
                for (int kl_e = kl_t; kl_e < 64 * (kl_dqp / 8); kl_e += 128) {
                    const int kl_i = kl_e / (kl_dqp / 8), kl_c = kl_e % (kl_dqp / 8) * 8;
                    auto* kl_dst = kl_kb + kl_i * (kl_dqp + 8) + kl_c;
                    if (kl_kq[kl_i] != nullptr && kl_c < kl_dq) asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" :: "r"((unsigned)__cvta_generic_to_shared(kl_dst)), "l"((kl_kq[kl_i] + kl_c)));
                    else *reinterpret_cast<uint4*>(kl_dst) = make_uint4(0u, 0u, 0u, 0u);
                }
            } else if (kl_cont) {
                for (int kl_e = kl_t; kl_e < 64 * kl_dqp; kl_e += 128) {
                    const int kl_i = kl_e / kl_dqp, kl_c = kl_e % kl_dqp;
                    kl_kb[kl_i * (kl_dqp + 8) + kl_c] = kl_kq[kl_i] != nullptr && kl_c < kl_dq ? kl_kq[kl_i][kl_c] : __float2half_rn(0.0f);
                }
            } else {
                for (int kl_e = kl_t; kl_e < 64 * kl_dqp; kl_e += 128) {
                    const int kl_i = kl_e / kl_dqp, kl_c = kl_e % kl_dqp;
                    kl_kb[kl_i * (kl_dqp + 8) + kl_c] = __float2half_rn(kl_c < kl_dq && kl_j0 + kl_i < kl_len ? kl_key(kl_r0 * kl_len + kl_j0 + kl_i, kl_c) : 0.0f);
                }
            }
            if (kl_cont && kl_a16 && kl_vec) {
                for (int kl_e = kl_t; kl_e < 64 * (kl_dvp / 8); kl_e += 128) {
                    const int kl_i = kl_e / (kl_dvp / 8), kl_c = kl_e % (kl_dvp / 8) * 8;
                    auto* kl_dst = kl_vb + kl_i * (kl_dvp + 8) + kl_c;
                    if (kl_vq[kl_i] != nullptr && kl_c < kl_dv) asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" :: "r"((unsigned)__cvta_generic_to_shared(kl_dst)), "l"((kl_vq[kl_i] + kl_c)));
                    else *reinterpret_cast<uint4*>(kl_dst) = make_uint4(0u, 0u, 0u, 0u);
                }
            } else if (kl_cont) {
                for (int kl_e = kl_t; kl_e < 64 * kl_dvp; kl_e += 128) {
                    const int kl_i = kl_e / kl_dvp, kl_c = kl_e % kl_dvp;
                    kl_vb[kl_i * (kl_dvp + 8) + kl_c] = kl_vq[kl_i] != nullptr && kl_c < kl_dv ? kl_vq[kl_i][kl_c] : __float2half_rn(0.0f);
                }
            } else {
                for (int kl_e = kl_t; kl_e < 64 * kl_dvp; kl_e += 128) {
                    const int kl_i = kl_e / kl_dvp, kl_c = kl_e % kl_dvp;
                    kl_vb[kl_i * (kl_dvp + 8) + kl_c] = __float2half_rn(kl_c < kl_dv && kl_j0 + kl_i < kl_len ? kl_term(kl_r0 * kl_dv + kl_c, kl_j0 + kl_i) : 0.0f);
                }
            }
            }
        }
        asm volatile("cp.async.commit_group;\n" ::);
        const int kl_uni = kl_nst == 1 ? kl_nu : kl_pu, kl_dead = kl_nst == 1 ? kl_nd : kl_pd;
        kl_pu = kl_nu;
        kl_pd = kl_nd;
        if (kl_j0 < 0) continue;
        if (kl_nst == 1) asm volatile("cp.async.wait_group 0;\n" ::: "memory");
        else asm volatile("cp.async.wait_group 1;\n" ::: "memory");
        __syncthreads();
        if (!kl_dead) {
            const int kl_cb = (int)(kl_j0 / 64 % kl_nst);
            const __half* kl_kb = kl_kh + kl_cb * 64 * kl_dqs;
            const __half* kl_vb = kl_vh + kl_cb * 64 * kl_dvs;
            float kl_s[8][4];
            #pragma unroll
            for (int kl_f = 0; kl_f < 8; ++kl_f)
                #pragma unroll
                for (int kl_e = 0; kl_e < 4; ++kl_e) kl_s[kl_f][kl_e] = 0.0f;
            if (kl_uni && kl_qok) {
                #pragma unroll
                for (int kl_q = 0; kl_q < 8; ++kl_q)
                    if (kl_q * 16 < kl_dqp) {
                        #pragma unroll
                        for (int kl_p = 0; kl_p < 4; ++kl_p) {
                            unsigned kl_b[4];
                            asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n" : "=r"(kl_b[0]), "=r"(kl_b[1]), "=r"(kl_b[2]), "=r"(kl_b[3]) : "r"((unsigned)__cvta_generic_to_shared(kl_kb + (kl_p * 16 + kl_kr) * kl_dqs + kl_q * 16 + kl_kc)));
                            asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n" : "+f"(kl_s[2 * kl_p][0]), "+f"(kl_s[2 * kl_p][1]), "+f"(kl_s[2 * kl_p][2]), "+f"(kl_s[2 * kl_p][3]) : "r"(kl_qf[kl_q][0]), "r"(kl_qf[kl_q][1]), "r"(kl_qf[kl_q][2]), "r"(kl_qf[kl_q][3]), "r"(kl_b[0]), "r"(kl_b[1]));
                            asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n" : "+f"(kl_s[2 * kl_p + 1][0]), "+f"(kl_s[2 * kl_p + 1][1]), "+f"(kl_s[2 * kl_p + 1][2]), "+f"(kl_s[2 * kl_p + 1][3]) : "r"(kl_qf[kl_q][0]), "r"(kl_qf[kl_q][1]), "r"(kl_qf[kl_q][2]), "r"(kl_qf[kl_q][3]), "r"(kl_b[2]), "r"(kl_b[3]));
                        }
                    }
                for (int kl_kk = 128; kl_kk < kl_dqp; kl_kk += 16) {
                    unsigned kl_a[4];
                    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n" : "=r"(kl_a[0]), "=r"(kl_a[1]), "=r"(kl_a[2]), "=r"(kl_a[3]) : "r"((unsigned)__cvta_generic_to_shared(kl_qh + (kl_w0 + kl_lr) * kl_dqs + kl_kk + kl_lc)));
                    {
                        #pragma unroll
                        for (int kl_p = 0; kl_p < 4; ++kl_p) {
                            unsigned kl_b[4];
                            asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n" : "=r"(kl_b[0]), "=r"(kl_b[1]), "=r"(kl_b[2]), "=r"(kl_b[3]) : "r"((unsigned)__cvta_generic_to_shared(kl_kb + (kl_p * 16 + kl_kr) * kl_dqs + kl_kk + kl_kc)));
                            asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n" : "+f"(kl_s[2 * kl_p][0]), "+f"(kl_s[2 * kl_p][1]), "+f"(kl_s[2 * kl_p][2]), "+f"(kl_s[2 * kl_p][3]) : "r"(kl_a[0]), "r"(kl_a[1]), "r"(kl_a[2]), "r"(kl_a[3]), "r"(kl_b[0]), "r"(kl_b[1]));
                            asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n" : "+f"(kl_s[2 * kl_p + 1][0]), "+f"(kl_s[2 * kl_p + 1][1]), "+f"(kl_s[2 * kl_p + 1][2]), "+f"(kl_s[2 * kl_p + 1][3]) : "r"(kl_a[0]), "r"(kl_a[1]), "r"(kl_a[2]), "r"(kl_a[3]), "r"(kl_b[2]), "r"(kl_b[3]));
                        }
                    }
                }
                #pragma unroll
                for (int kl_f = 0; kl_f < 8; ++kl_f)
                    #pragma unroll
                    for (int kl_e = 0; kl_e < 4; ++kl_e) {
                        const long long kl_r = kl_ra + (kl_e >> 1) * 8, kl_j = kl_j0 + kl_f * 8 + kl_c2 + (kl_e & 1);
                        const float kl_d = kl_s[kl_f][kl_e];
                        kl_s[kl_f][kl_e] = kl_rk[kl_e >> 1] && kl_j < kl_len ? kl_vrk(kl_r, kl_j, kl_rm[kl_e >> 1], kl_d) : -INFINITY;
                    }
            } else {
                for (int kl_e = kl_lane; kl_e < 16 * 64; kl_e += 32) {
                    const int kl_rr = kl_w0 + kl_e / 64, kl_jj = kl_e % 64;
                    const long long kl_r = kl_r0 + kl_rr, kl_j = kl_j0 + kl_jj;
                    float kl_v = -INFINITY;
                    if (kl_rowok(kl_r) && kl_j < kl_len && !(kl_vrk(kl_r, kl_j, kl_r % S, 0.0f) == -INFINITY && kl_vrk(kl_r, kl_j, kl_r % S, 1.0f) == -INFINITY)) kl_v = kl_direct(kl_r * kl_len + kl_j);
                    kl_sc[kl_rr * 68 + kl_jj] = kl_v;
                }
                __syncwarp();
                #pragma unroll
                for (int kl_f = 0; kl_f < 8; ++kl_f)
                    #pragma unroll
                    for (int kl_e = 0; kl_e < 4; ++kl_e)
                        kl_s[kl_f][kl_e] = kl_sc[(kl_w0 + kl_g + (kl_e >> 1) * 8) * 68 + kl_f * 8 + kl_c2 + (kl_e & 1)];
                __syncwarp();
            }
            float kl_mt[2] = {-INFINITY, -INFINITY}, kl_sum[2] = {0.0f, 0.0f}, kl_al[2];
            #pragma unroll
            for (int kl_f = 0; kl_f < 8; ++kl_f)
                #pragma unroll
                for (int kl_e = 0; kl_e < 4; ++kl_e) kl_mt[kl_e >> 1] = fmaxf(kl_mt[kl_e >> 1], kl_s[kl_f][kl_e]);
            #pragma unroll
            for (int kl_i = 0; kl_i < 2; ++kl_i) {
                kl_mt[kl_i] = fmaxf(kl_mt[kl_i], __shfl_xor_sync(0xffffffffu, kl_mt[kl_i], 1));
                kl_mt[kl_i] = fmaxf(kl_mt[kl_i], __shfl_xor_sync(0xffffffffu, kl_mt[kl_i], 2));
                const float kl_mo = kl_m[kl_i], kl_mn = fmaxf(kl_mo, kl_mt[kl_i]);
                kl_al[kl_i] = kl_mn == -INFINITY ? 1.0f : __expf(kl_mo - kl_mn);
                kl_m[kl_i] = kl_mn;
            }
            kl_saw |= kl_mt[0] == -INFINITY || kl_mt[1] == -INFINITY;  // a row of the tile masked whole
            const int kl_live = __any_sync(0xffffffffu, kl_mt[0] != -INFINITY || kl_mt[1] != -INFINITY);
            const int kl_rescale = __any_sync(0xffffffffu, kl_al[0] != 1.0f || kl_al[1] != 1.0f);
            #pragma unroll
            for (int kl_f = 0; kl_f < 8; ++kl_f)
                #pragma unroll
                for (int kl_e = 0; kl_e < 4; ++kl_e) {
                    const float kl_sv = kl_s[kl_f][kl_e], kl_mr = kl_m[kl_e >> 1];
                    const float kl_p = kl_sv == -INFINITY ? 0.0f : __expf(kl_sv - kl_mr);
                    kl_s[kl_f][kl_e] = kl_p;
                    kl_sum[kl_e >> 1] += kl_p;
                }
            #pragma unroll
            for (int kl_i = 0; kl_i < 2; ++kl_i) {
                kl_sum[kl_i] += __shfl_xor_sync(0xffffffffu, kl_sum[kl_i], 1);
                kl_sum[kl_i] += __shfl_xor_sync(0xffffffffu, kl_sum[kl_i], 2);
                kl_l[kl_i] = kl_l[kl_i] * kl_al[kl_i] + kl_sum[kl_i];
            }
            if (kl_live) {
                unsigned kl_pa[4][4];
                #pragma unroll
                for (int kl_k = 0; kl_k < 4; ++kl_k) {
                    kl_pa[kl_k][0] = ((unsigned)__half_as_ushort(__float2half_rn(kl_s[2 * kl_k][0])) | ((unsigned)__half_as_ushort(__float2half_rn(kl_s[2 * kl_k][1])) << 16));
                    kl_pa[kl_k][1] = ((unsigned)__half_as_ushort(__float2half_rn(kl_s[2 * kl_k][2])) | ((unsigned)__half_as_ushort(__float2half_rn(kl_s[2 * kl_k][3])) << 16));
                    kl_pa[kl_k][2] = ((unsigned)__half_as_ushort(__float2half_rn(kl_s[2 * kl_k + 1][0])) | ((unsigned)__half_as_ushort(__float2half_rn(kl_s[2 * kl_k + 1][1])) << 16));
                    kl_pa[kl_k][3] = ((unsigned)__half_as_ushort(__float2half_rn(kl_s[2 * kl_k + 1][2])) | ((unsigned)__half_as_ushort(__float2half_rn(kl_s[2 * kl_k + 1][3])) << 16));
                }
                if (!kl_uni) {
                    #pragma unroll
                    for (int kl_f = 0; kl_f < 8; ++kl_f)
                        #pragma unroll
                        for (int kl_e = 0; kl_e < 4; ++kl_e)
                            kl_sc[(kl_w0 + kl_g + (kl_e >> 1) * 8) * 68 + kl_f * 8 + kl_c2 + (kl_e & 1)] = kl_s[kl_f][kl_e];
                    __syncwarp();
                }
                for (int kl_c0 = 0; kl_c0 < kl_dvp; kl_c0 += 128) {
                    if (!kl_oreg) {
                    #pragma unroll
                    for (int kl_n = 0; kl_n < 16; ++kl_n)
                        #pragma unroll
                        for (int kl_e = 0; kl_e < 4; ++kl_e)
                            if (kl_c0 + kl_n * 8 < kl_dvp) kl_o[kl_n][kl_e] = kl_os[(kl_w0 + kl_g + (kl_e >> 1) * 8) * kl_dos + kl_c0 + kl_n * 8 + kl_c2 + (kl_e & 1)];
                }
                    if (kl_rescale)  // exact to skip: every factor of the warp is 1
                        #pragma unroll
                        for (int kl_n = 0; kl_n < 16; ++kl_n)
                            #pragma unroll
                            for (int kl_e = 0; kl_e < 4; ++kl_e) kl_o[kl_n][kl_e] *= kl_al[kl_e >> 1];
                    if (kl_uni) {
                        #pragma unroll
                        for (int kl_k = 0; kl_k < 4; ++kl_k)
                            #pragma unroll
                            for (int kl_n = 0; kl_n < 8; ++kl_n)
                                if (kl_c0 + kl_n * 16 < kl_dvp) {
                                    unsigned kl_b[4];
                                    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n" : "=r"(kl_b[0]), "=r"(kl_b[1]), "=r"(kl_b[2]), "=r"(kl_b[3]) : "r"((unsigned)__cvta_generic_to_shared(kl_vb + (kl_k * 16 + kl_lr) * kl_dvs + kl_c0 + kl_n * 16 + kl_lc)));
                                    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n" : "+f"(kl_o[2 * kl_n][0]), "+f"(kl_o[2 * kl_n][1]), "+f"(kl_o[2 * kl_n][2]), "+f"(kl_o[2 * kl_n][3]) : "r"(kl_pa[kl_k][0]), "r"(kl_pa[kl_k][1]), "r"(kl_pa[kl_k][2]), "r"(kl_pa[kl_k][3]), "r"(kl_b[0]), "r"(kl_b[1]));
                                    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n" : "+f"(kl_o[2 * kl_n + 1][0]), "+f"(kl_o[2 * kl_n + 1][1]), "+f"(kl_o[2 * kl_n + 1][2]), "+f"(kl_o[2 * kl_n + 1][3]) : "r"(kl_pa[kl_k][0]), "r"(kl_pa[kl_k][1]), "r"(kl_pa[kl_k][2]), "r"(kl_pa[kl_k][3]), "r"(kl_b[2]), "r"(kl_b[3]));
                                }
                    } else {
                        for (int kl_n = 0; kl_n < 16; ++kl_n) {  // rolled: the term lambda written 4 times, not 64
                            float kl_t4[4] = {0.0f, 0.0f, 0.0f, 0.0f};
                            #pragma unroll
                            for (int kl_e = 0; kl_e < 4; ++kl_e) {
                                const int kl_c = kl_c0 + kl_n * 8 + kl_c2 + (kl_e & 1), kl_rr = kl_w0 + kl_g + (kl_e >> 1) * 8;
                                if (kl_c >= kl_dv) continue;
                                for (int kl_jj = 0; kl_jj < 64 && kl_j0 + kl_jj < kl_len; ++kl_jj) {
                                    const float kl_w = kl_sc[kl_rr * 68 + kl_jj];
                                    if (kl_w != 0.0f) kl_t4[kl_e] += kl_w * kl_term((kl_r0 + kl_rr) * kl_dv + kl_c, kl_j0 + kl_jj);
                                }
                            }
                            #pragma unroll
                            for (int kl_m2 = 0; kl_m2 < 16; ++kl_m2)
                                if (kl_m2 == kl_n)
                                    #pragma unroll
                                    for (int kl_e = 0; kl_e < 4; ++kl_e) kl_o[kl_m2][kl_e] += kl_t4[kl_e];
                        }
                    }
                    if (!kl_oreg) {
                    #pragma unroll
                    for (int kl_n = 0; kl_n < 16; ++kl_n)
                        #pragma unroll
                        for (int kl_e = 0; kl_e < 4; ++kl_e)
                            if (kl_c0 + kl_n * 8 < kl_dvp) kl_os[(kl_w0 + kl_g + (kl_e >> 1) * 8) * kl_dos + kl_c0 + kl_n * 8 + kl_c2 + (kl_e & 1)] = kl_o[kl_n][kl_e];
                }
                }
                __syncwarp();
            }
        } else {
            kl_saw = 1;
        }
        __syncthreads();
    }
    asm volatile("cp.async.wait_group 0;\n" ::: "memory");
    for (int kl_c0 = 0; kl_c0 < kl_dvp; kl_c0 += 128) {
        if (!kl_oreg) {
                    #pragma unroll
                    for (int kl_n = 0; kl_n < 16; ++kl_n)
                        #pragma unroll
                        for (int kl_e = 0; kl_e < 4; ++kl_e)
                            if (kl_c0 + kl_n * 8 < kl_dvp) kl_o[kl_n][kl_e] = kl_os[(kl_w0 + kl_g + (kl_e >> 1) * 8) * kl_dos + kl_c0 + kl_n * 8 + kl_c2 + (kl_e & 1)];
                }
        #pragma unroll
        for (int kl_n = 0; kl_n < 16; ++kl_n)
            #pragma unroll
            for (int kl_e = 0; kl_e < 4; ++kl_e) {
                const int kl_c = kl_c0 + kl_n * 8 + kl_c2 + (kl_e & 1);
                const long long kl_r = kl_ra + (kl_e >> 1) * 8;
                if (kl_c < kl_dv && kl_rk[kl_e >> 1]) kl_out(kl_r * kl_dv + kl_c, kl_o[kl_n][kl_e] / kl_l[kl_e >> 1]);
            }
    }
}




extern "C" void launch(const __half* Q, const __half* K, const __half* V, __half* O, float* P, int B, int H,
                       int S, int D, int causal, cudaStream_t stream) {
    const int BH = B * H;
    const float scale = 1.0f / sqrtf((float)D);
    constexpr int T = 256;
    long long n1 = (long long)BH * S * S, n2 = (long long)BH * S, n3 = (long long)BH * S * D;
    {
        const size_t kl_smem = (size_t)((4352 + (((D + 15) / 16 * 16) > 128 ? 64 * (((D + 15) / 16 * 16) + 4) : 0)) * 4 + 2048 + (64 * (((D + 15) / 16 * 16) + 8) + (((4352 + (((D + 15) / 16 * 16) > 128 ? 64 * (((D + 15) / 16 * 16) + 4) : 0)) * 4 + 2048 + (64 * (((D + 15) / 16 * 16) + 8) + 2 * 64 * (((D + 15) / 16 * 16) + 8 + ((D + 15) / 16 * 16) + 8)) * 2) <= 232448 ? 2 : 1) * 64 * (((D + 15) / 16 * 16) + 8 + ((D + 15) / 16 * 16) + 8)) * 2);
        cudaFuncSetAttribute(attn_scores_flash, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)kl_smem);
        attn_scores_flash<<<(unsigned)(((BH*S) + 63) / 64), 128, kl_smem, stream>>>(Q, K, BH, S, D, causal, scale, V, O);
    }
}
