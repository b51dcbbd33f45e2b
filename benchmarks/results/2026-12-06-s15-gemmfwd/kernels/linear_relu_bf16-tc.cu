// linear_relu_bf16, naive: one thread per element of Y, fp32 accumulation over K through global memory.
#include <cuda_runtime.h>
#include <cuda_bf16.h>

__global__ void linear_relu_bf16_naive(const __nv_bfloat16* X, const __nv_bfloat16* W, __nv_bfloat16* Y,
                                       int M, int N, int K) {
    extern __shared__ __align__(128) unsigned char kl_smem[];  // 3 stages of A, then of B
    typedef __nv_bfloat16 kl_As_stage[128][72];
    kl_As_stage* kl_As = reinterpret_cast<kl_As_stage*>(kl_smem + 0);
    typedef __nv_bfloat16 kl_Bs_stage[128][72];
    kl_Bs_stage* kl_Bs = reinterpret_cast<kl_Bs_stage*>(kl_smem + 55296);
    const int kl_warp = threadIdx.x / 32, kl_lane = threadIdx.x % 32;
    const int kl_wm = (kl_warp / 2) * 64, kl_wn = (kl_warp % 2) * 64;
    const int kl_row0 = blockIdx.y * 128, kl_col0 = blockIdx.x * 128;
    // kl_As: layout facts of the fast path, read from the naive index once a block
    const __nv_bfloat16* kl_a_p;
    long long kl_a_ld, kl_a_step;
    bool kl_a_ok;
    {
        const __nv_bfloat16* kl_p00;
        const __nv_bfloat16* kl_p01;
        const __nv_bfloat16* kl_p10;
        const __nv_bfloat16* kl_pk;
        {
            const int kl_k0 = 0;
            { const int row = kl_row0 + 0; const int k = kl_k0 + 0; kl_p00 = &X[(size_t)row * K + k]; }
            { const int row = kl_row0 + 0; const int k = kl_k0 + 1; kl_p01 = &X[(size_t)row * K + k]; }
            { const int row = kl_row0 + 1; const int k = kl_k0 + 0; kl_p10 = &X[(size_t)row * K + k]; }
        }
        {
            const int kl_k0 = 64;
            { const int row = kl_row0 + 0; const int k = kl_k0 + 0; kl_pk = &X[(size_t)row * K + k]; }
        }
        kl_a_ld = kl_p10 - kl_p00;
        kl_a_step = kl_pk - kl_p00;
        kl_a_ok = kl_p01 == kl_p00 + 1 && (reinterpret_cast<size_t>(kl_p00) & 15) == 0 &&
                   kl_a_ld % 8 == 0 && kl_a_step % 8 == 0 &&
                   kl_a_ld > -16777216 && kl_a_ld < 16777216;
        kl_a_p = kl_p00 + (int)(threadIdx.x / 8) * (int)kl_a_ld + (int)(threadIdx.x % 8) * 8;
    }
    // kl_Bs: layout facts of the fast path, read from the naive index once a block
    const __nv_bfloat16* kl_b_p;
    long long kl_b_ld, kl_b_step;
    bool kl_b_ok;
    {
        const __nv_bfloat16* kl_p00;
        const __nv_bfloat16* kl_p01;
        const __nv_bfloat16* kl_p10;
        const __nv_bfloat16* kl_pk;
        {
            const int kl_k0 = 0;
            { const int col = kl_col0 + 0; const int k = kl_k0 + 0; kl_p00 = &W[(size_t)col * K + k]; }
            { const int col = kl_col0 + 0; const int k = kl_k0 + 1; kl_p01 = &W[(size_t)col * K + k]; }
            { const int col = kl_col0 + 1; const int k = kl_k0 + 0; kl_p10 = &W[(size_t)col * K + k]; }
        }
        {
            const int kl_k0 = 64;
            { const int col = kl_col0 + 0; const int k = kl_k0 + 0; kl_pk = &W[(size_t)col * K + k]; }
        }
        kl_b_ld = kl_p10 - kl_p00;
        kl_b_step = kl_pk - kl_p00;
        kl_b_ok = kl_p01 == kl_p00 + 1 && (reinterpret_cast<size_t>(kl_p00) & 15) == 0 &&
                   kl_b_ld % 8 == 0 && kl_b_step % 8 == 0 &&
                   kl_b_ld > -16777216 && kl_b_ld < 16777216;
        kl_b_p = kl_p00 + (int)(threadIdx.x / 8) * (int)kl_b_ld + (int)(threadIdx.x % 8) * 8;
    }
    float kl_acc[4][8][4];  // m16n8 tiles: rows lane / 4 (+ 8), columns 2 * (lane % 4) (+ 1)
#pragma unroll
    for (int kl_i = 0; kl_i < 4; ++kl_i)
#pragma unroll
        for (int kl_j = 0; kl_j < 8; ++kl_j)
#pragma unroll
            for (int kl_e = 0; kl_e < 4; ++kl_e) kl_acc[kl_i][kl_j][kl_e] = 0.0f;
    for (int kl_kt = 0; kl_kt < 2; ++kl_kt) {  // slices 0 .. 1 into stages 0 .. 1
        const int kl_s = kl_kt, kl_k0 = kl_kt * 64;
        if (kl_k0 < K) {
            if (kl_a_ok && kl_row0 + 128 <= M && kl_k0 + 64 <= K) {  // the whole slice in range: no test per element
                const __nv_bfloat16* kl_src = kl_a_p + kl_kt * kl_a_step;
                __nv_bfloat16* kl_dst = &kl_As[kl_s][threadIdx.x / 8][(threadIdx.x % 8) * 8];
                const int kl_ld32 = (int)kl_a_ld;
    #pragma unroll
                for (int kl_i = 0; kl_i < 8; ++kl_i) {
                    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(static_cast<unsigned>(__cvta_generic_to_shared(kl_dst + kl_i * 1152))), "l"(kl_src + kl_i * 16 * kl_ld32));
                }
            } else {
                for (int kl_e = threadIdx.x; kl_e < 1024; kl_e += 128) {
                    const int kl_r = kl_e / 8, kl_c = (kl_e % 8) * 8;
                    __nv_bfloat16* kl_dst = &kl_As[kl_s][kl_r][kl_c];
                    bool kl_in = true;
                    const __nv_bfloat16* kl_first = nullptr;
                    const __nv_bfloat16* kl_last = nullptr;
        #pragma unroll
                    for (int kl_i = 0; kl_i < 8; ++kl_i) {
                        const int row = kl_row0 + kl_r; const int k = kl_k0 + kl_c + kl_i;
                        kl_in = kl_in && (!(row >= M) && (k < K));
                    }
                    if (kl_in) {
                        { const int row = kl_row0 + kl_r; const int k = kl_k0 + kl_c; kl_first = &X[(size_t)row * K + k]; }
                        { const int row = kl_row0 + kl_r; const int k = kl_k0 + kl_c + 7; kl_last = &X[(size_t)row * K + k]; }
                    }
                    if (kl_in && kl_last == kl_first + 7 && (reinterpret_cast<size_t>(kl_first) & 15) == 0) {
                        asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(static_cast<unsigned>(__cvta_generic_to_shared(kl_dst))), "l"(kl_first));
                    } else {
                        for (int kl_i = 0; kl_i < 8; ++kl_i) {
                            const int row = kl_row0 + kl_r; const int k = kl_k0 + kl_c + kl_i;
                            kl_dst[kl_i] = (!(row >= M) && (k < K)) ? X[(size_t)row * K + k] : __float2bfloat16(0.0f);
                        }
                    }
                }
            }
            if (kl_b_ok && kl_col0 + 128 <= N && kl_k0 + 64 <= K) {  // the whole slice in range: no test per element
                const __nv_bfloat16* kl_src = kl_b_p + kl_kt * kl_b_step;
                __nv_bfloat16* kl_dst = &kl_Bs[kl_s][threadIdx.x / 8][(threadIdx.x % 8) * 8];
                const int kl_ld32 = (int)kl_b_ld;
    #pragma unroll
                for (int kl_i = 0; kl_i < 8; ++kl_i) {
                    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(static_cast<unsigned>(__cvta_generic_to_shared(kl_dst + kl_i * 1152))), "l"(kl_src + kl_i * 16 * kl_ld32));
                }
            } else {
                for (int kl_e = threadIdx.x; kl_e < 1024; kl_e += 128) {
                    const int kl_r = kl_e / 8, kl_c = (kl_e % 8) * 8;
                    __nv_bfloat16* kl_dst = &kl_Bs[kl_s][kl_r][kl_c];
                    bool kl_in = true;
                    const __nv_bfloat16* kl_first = nullptr;
                    const __nv_bfloat16* kl_last = nullptr;
        #pragma unroll
                    for (int kl_i = 0; kl_i < 8; ++kl_i) {
                        const int col = kl_col0 + kl_r; const int k = kl_k0 + kl_c + kl_i;
                        kl_in = kl_in && (!(col >= N) && (k < K));
                    }
                    if (kl_in) {
                        { const int col = kl_col0 + kl_r; const int k = kl_k0 + kl_c; kl_first = &W[(size_t)col * K + k]; }
                        { const int col = kl_col0 + kl_r; const int k = kl_k0 + kl_c + 7; kl_last = &W[(size_t)col * K + k]; }
                    }
                    if (kl_in && kl_last == kl_first + 7 && (reinterpret_cast<size_t>(kl_first) & 15) == 0) {
                        asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(static_cast<unsigned>(__cvta_generic_to_shared(kl_dst))), "l"(kl_first));
                    } else {
                        for (int kl_i = 0; kl_i < 8; ++kl_i) {
                            const int col = kl_col0 + kl_r; const int k = kl_k0 + kl_c + kl_i;
                            kl_dst[kl_i] = (!(col >= N) && (k < K)) ? W[(size_t)col * K + k] : __float2bfloat16(0.0f);
                        }
                    }
                }
            }
        }
        asm volatile("cp.async.commit_group;\n" ::);
    }
    for (int kl_k = 0; kl_k < K; kl_k += 64) {
        const int kl_t = kl_k / 64, kl_cur = kl_t % 3;
        asm volatile("cp.async.wait_group 1;\n" ::: "memory");  // slice kl_t has landed
        __syncthreads();  // ... for every thread, and stage kl_t - 1 is free again
        {  // slice kl_t + 2 into the stage slice kl_t - 1 used, while slice kl_t is multiplied
            const int kl_kt = kl_t + 2, kl_s = kl_kt % 3, kl_k0 = kl_kt * 64;
            if (kl_k0 < K) {
                if (kl_a_ok && kl_row0 + 128 <= M && kl_k0 + 64 <= K) {  // the whole slice in range: no test per element
                    const __nv_bfloat16* kl_src = kl_a_p + kl_kt * kl_a_step;
                    __nv_bfloat16* kl_dst = &kl_As[kl_s][threadIdx.x / 8][(threadIdx.x % 8) * 8];
                    const int kl_ld32 = (int)kl_a_ld;
        #pragma unroll
                    for (int kl_i = 0; kl_i < 8; ++kl_i) {
                        asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(static_cast<unsigned>(__cvta_generic_to_shared(kl_dst + kl_i * 1152))), "l"(kl_src + kl_i * 16 * kl_ld32));
                    }
                } else {
                    for (int kl_e = threadIdx.x; kl_e < 1024; kl_e += 128) {
                        const int kl_r = kl_e / 8, kl_c = (kl_e % 8) * 8;
                        __nv_bfloat16* kl_dst = &kl_As[kl_s][kl_r][kl_c];
                        bool kl_in = true;
                        const __nv_bfloat16* kl_first = nullptr;
                        const __nv_bfloat16* kl_last = nullptr;
            #pragma unroll
                        for (int kl_i = 0; kl_i < 8; ++kl_i) {
                            const int row = kl_row0 + kl_r; const int k = kl_k0 + kl_c + kl_i;
                            kl_in = kl_in && (!(row >= M) && (k < K));
                        }
                        if (kl_in) {
                            { const int row = kl_row0 + kl_r; const int k = kl_k0 + kl_c; kl_first = &X[(size_t)row * K + k]; }
                            { const int row = kl_row0 + kl_r; const int k = kl_k0 + kl_c + 7; kl_last = &X[(size_t)row * K + k]; }
                        }
                        if (kl_in && kl_last == kl_first + 7 && (reinterpret_cast<size_t>(kl_first) & 15) == 0) {
                            asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(static_cast<unsigned>(__cvta_generic_to_shared(kl_dst))), "l"(kl_first));
                        } else {
                            for (int kl_i = 0; kl_i < 8; ++kl_i) {
                                const int row = kl_row0 + kl_r; const int k = kl_k0 + kl_c + kl_i;
                                kl_dst[kl_i] = (!(row >= M) && (k < K)) ? X[(size_t)row * K + k] : __float2bfloat16(0.0f);
                            }
                        }
                    }
                }
                if (kl_b_ok && kl_col0 + 128 <= N && kl_k0 + 64 <= K) {  // the whole slice in range: no test per element
                    const __nv_bfloat16* kl_src = kl_b_p + kl_kt * kl_b_step;
                    __nv_bfloat16* kl_dst = &kl_Bs[kl_s][threadIdx.x / 8][(threadIdx.x % 8) * 8];
                    const int kl_ld32 = (int)kl_b_ld;
        #pragma unroll
                    for (int kl_i = 0; kl_i < 8; ++kl_i) {
                        asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(static_cast<unsigned>(__cvta_generic_to_shared(kl_dst + kl_i * 1152))), "l"(kl_src + kl_i * 16 * kl_ld32));
                    }
                } else {
                    for (int kl_e = threadIdx.x; kl_e < 1024; kl_e += 128) {
                        const int kl_r = kl_e / 8, kl_c = (kl_e % 8) * 8;
                        __nv_bfloat16* kl_dst = &kl_Bs[kl_s][kl_r][kl_c];
                        bool kl_in = true;
                        const __nv_bfloat16* kl_first = nullptr;
                        const __nv_bfloat16* kl_last = nullptr;
            #pragma unroll
                        for (int kl_i = 0; kl_i < 8; ++kl_i) {
                            const int col = kl_col0 + kl_r; const int k = kl_k0 + kl_c + kl_i;
                            kl_in = kl_in && (!(col >= N) && (k < K));
                        }
                        if (kl_in) {
                            { const int col = kl_col0 + kl_r; const int k = kl_k0 + kl_c; kl_first = &W[(size_t)col * K + k]; }
                            { const int col = kl_col0 + kl_r; const int k = kl_k0 + kl_c + 7; kl_last = &W[(size_t)col * K + k]; }
                        }
                        if (kl_in && kl_last == kl_first + 7 && (reinterpret_cast<size_t>(kl_first) & 15) == 0) {
                            asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(static_cast<unsigned>(__cvta_generic_to_shared(kl_dst))), "l"(kl_first));
                        } else {
                            for (int kl_i = 0; kl_i < 8; ++kl_i) {
                                const int col = kl_col0 + kl_r; const int k = kl_k0 + kl_c + kl_i;
                                kl_dst[kl_i] = (!(col >= N) && (k < K)) ? W[(size_t)col * K + k] : __float2bfloat16(0.0f);
                            }
                        }
                    }
                }
            }
            asm volatile("cp.async.commit_group;\n" ::);
        }
        const unsigned kl_as = static_cast<unsigned>(__cvta_generic_to_shared(&kl_As[kl_cur][0][0]));
        const unsigned kl_bs = static_cast<unsigned>(__cvta_generic_to_shared(&kl_Bs[kl_cur][0][0]));
#pragma unroll
        for (int kl_kk = 0; kl_kk < 64; kl_kk += 16) {
            unsigned kl_af[4][4], kl_bf[4][4];  // A: 16 x 16 a tile; B: two 16 x 8 tiles
#pragma unroll
            for (int kl_i = 0; kl_i < 4; ++kl_i)
                asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                             : "=r"(kl_af[kl_i][0]), "=r"(kl_af[kl_i][1]), "=r"(kl_af[kl_i][2]), "=r"(kl_af[kl_i][3])
                             : "r"(kl_as + 2 * ((kl_wm + kl_i * 16 + kl_lane % 16) * 72 + kl_kk + (kl_lane / 16) * 8)));
#pragma unroll
            for (int kl_j = 0; kl_j < 4; ++kl_j)
                asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                             : "=r"(kl_bf[kl_j][0]), "=r"(kl_bf[kl_j][1]), "=r"(kl_bf[kl_j][2]), "=r"(kl_bf[kl_j][3])
                             : "r"(kl_bs + 2 * ((kl_wn + kl_j * 16 + kl_lane % 8 + (kl_lane / 16) * 8) * 72 + kl_kk + ((kl_lane / 8) % 2) * 8)));
#pragma unroll
            for (int kl_i = 0; kl_i < 4; ++kl_i)
#pragma unroll
                for (int kl_j = 0; kl_j < 8; ++kl_j)
                    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 "
                                 "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"
                                 : "+f"(kl_acc[kl_i][kl_j][0]), "+f"(kl_acc[kl_i][kl_j][1]),
                                   "+f"(kl_acc[kl_i][kl_j][2]), "+f"(kl_acc[kl_i][kl_j][3])
                                 : "r"(kl_af[kl_i][0]), "r"(kl_af[kl_i][1]), "r"(kl_af[kl_i][2]), "r"(kl_af[kl_i][3]),
                                   "r"(kl_bf[kl_j / 2][(kl_j % 2) * 2]), "r"(kl_bf[kl_j / 2][(kl_j % 2) * 2 + 1]));
        }
    }
    asm volatile("cp.async.wait_group 0;\n" ::: "memory");
#pragma unroll
    for (int kl_i = 0; kl_i < 4; ++kl_i)
#pragma unroll
        for (int kl_j = 0; kl_j < 8; ++kl_j)
#pragma unroll
            for (int kl_e = 0; kl_e < 4; ++kl_e) {
                const int row = kl_row0 + kl_wm + kl_i * 16 + kl_lane / 4 + (kl_e / 2) * 8;
                const int col = kl_col0 + kl_wn + kl_j * 8 + (kl_lane % 4) * 2 + kl_e % 2;
                if (row >= M || col >= N) continue;
                float acc = kl_acc[kl_i][kl_j][kl_e];
                    Y[(size_t)row * N + col] = __float2bfloat16_rn(fmaxf(acc, 0.0f));
            }
}

extern "C" void launch(const __nv_bfloat16* X, const __nv_bfloat16* W, __nv_bfloat16* Y, int M, int N, int K,
                       cudaStream_t stream) {
    dim3 block(32, 8);
    dim3 grid((N + 31) / 32, (M + 7) / 8);
    {
        cudaFuncSetAttribute(linear_relu_bf16_naive, cudaFuncAttributeMaxDynamicSharedMemorySize, 110592);
        linear_relu_bf16_naive<<<dim3((N + 127) / 128, (M + 127) / 128), dim3(128), 110592, stream>>>(X, W, Y, M, N, K);
    }
}
