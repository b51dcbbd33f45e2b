// linear_relu_bf16, naive: one thread per element of Y, fp32 accumulation over K through global memory.
#include <cuda_runtime.h>
#include <cuda_bf16.h>
#include <mma.h>

__global__ void linear_relu_bf16_naive(const __nv_bfloat16* __restrict__  X, const __nv_bfloat16* __restrict__  W, __nv_bfloat16* __restrict__  Y,
                                       int M, int N, int K) {
    __shared__ __align__(128) __nv_bfloat16 kl_As[2][128][40];
    __shared__ __align__(128) __nv_bfloat16 kl_Bs[2][128][40];
    const int kl_warp = threadIdx.x / 32, kl_lane = threadIdx.x % 32;
    const int kl_wm = (kl_warp / 2) * 32, kl_wn = (kl_warp % 2) * 64;
    const int kl_row0 = blockIdx.y * 128, kl_col0 = blockIdx.x * 128;
    nvcuda::wmma::fragment<nvcuda::wmma::accumulator, 16, 16, 16, float> kl_acc[2][4];
#pragma unroll
    for (int kl_i = 0; kl_i < 2; ++kl_i)
#pragma unroll
        for (int kl_j = 0; kl_j < 4; ++kl_j) nvcuda::wmma::fill_fragment(kl_acc[kl_i][kl_j], 0.0f);
    {  // slice 0 into buffer 0
        const int kl_s = 0, kl_k0 = 0;
        for (int kl_e = threadIdx.x; kl_e < 512; kl_e += 256) {
            const int kl_r = kl_e / 4, kl_c = (kl_e % 4) * 8;
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
                    kl_dst[kl_i] = (!(row >= M) && (k < K)) ? __ldg(&X[(size_t)row * K + k]) : __float2bfloat16(0.0f);
                }
            }
        }
        for (int kl_e = threadIdx.x; kl_e < 512; kl_e += 256) {
            const int kl_r = kl_e / 4, kl_c = (kl_e % 4) * 8;
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
                    kl_dst[kl_i] = (!(col >= N) && (k < K)) ? __ldg(&W[(size_t)col * K + k]) : __float2bfloat16(0.0f);
                }
            }
        }
    }
    asm volatile("cp.async.commit_group;\n" ::);
    for (int kl_k0 = 0; kl_k0 < K; kl_k0 += 32) {
        const int kl_cur = (kl_k0 / 32) & 1, kl_next = kl_k0 + 32;
        if (kl_next < K) {  // slice kt + 1 into the other buffer while slice kt is multiplied
            const int kl_s = kl_cur ^ 1, kl_k0 = kl_next;
            for (int kl_e = threadIdx.x; kl_e < 512; kl_e += 256) {
                const int kl_r = kl_e / 4, kl_c = (kl_e % 4) * 8;
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
                        kl_dst[kl_i] = (!(row >= M) && (k < K)) ? __ldg(&X[(size_t)row * K + k]) : __float2bfloat16(0.0f);
                    }
                }
            }
            for (int kl_e = threadIdx.x; kl_e < 512; kl_e += 256) {
                const int kl_r = kl_e / 4, kl_c = (kl_e % 4) * 8;
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
                        kl_dst[kl_i] = (!(col >= N) && (k < K)) ? __ldg(&W[(size_t)col * K + k]) : __float2bfloat16(0.0f);
                    }
                }
            }
        }
        asm volatile("cp.async.commit_group;\n" ::);
        asm volatile("cp.async.wait_group 1;\n" ::: "memory");
        __syncthreads();
#pragma unroll
        for (int kl_kk = 0; kl_kk < 32; kl_kk += 16) {
            nvcuda::wmma::fragment<nvcuda::wmma::matrix_a, 16, 16, 16, __nv_bfloat16, nvcuda::wmma::row_major> kl_a[2];
            nvcuda::wmma::fragment<nvcuda::wmma::matrix_b, 16, 16, 16, __nv_bfloat16, nvcuda::wmma::col_major> kl_b[4];
#pragma unroll
            for (int kl_i = 0; kl_i < 2; ++kl_i) nvcuda::wmma::load_matrix_sync(kl_a[kl_i], &kl_As[kl_cur][kl_wm + kl_i * 16][kl_kk], 40);
#pragma unroll
            for (int kl_j = 0; kl_j < 4; ++kl_j) nvcuda::wmma::load_matrix_sync(kl_b[kl_j], &kl_Bs[kl_cur][kl_wn + kl_j * 16][kl_kk], 40);
#pragma unroll
            for (int kl_i = 0; kl_i < 2; ++kl_i)
#pragma unroll
                for (int kl_j = 0; kl_j < 4; ++kl_j) nvcuda::wmma::mma_sync(kl_acc[kl_i][kl_j], kl_a[kl_i], kl_b[kl_j], kl_acc[kl_i][kl_j]);
        }
        __syncthreads();
    }
    asm volatile("cp.async.wait_group 0;\n" ::: "memory");
    __syncthreads();
    float* kl_Ws = reinterpret_cast<float*>(&kl_As[0][0][0]) + kl_warp * 384;
#pragma unroll
    for (int kl_i = 0; kl_i < 2; ++kl_i)
#pragma unroll
        for (int kl_j = 0; kl_j < 4; ++kl_j) {
            nvcuda::wmma::store_matrix_sync(kl_Ws, kl_acc[kl_i][kl_j], 24, nvcuda::wmma::mem_row_major);
            __syncwarp();
            for (int kl_e = kl_lane; kl_e < 256; kl_e += 32) {
                const int row = kl_row0 + kl_wm + kl_i * 16 + kl_e / 16;
                const int col = kl_col0 + kl_wn + kl_j * 16 + kl_e % 16;
                if (row >= M || col >= N) continue;
                float acc = kl_Ws[(kl_e / 16) * 24 + kl_e % 16];
                Y[(size_t)row * N + col] = __float2bfloat16_rn(fmaxf(acc, 0.0f));
            }
            __syncwarp();
        }
}

extern "C" void launch(const __nv_bfloat16* X, const __nv_bfloat16* W, __nv_bfloat16* Y, int M, int N, int K,
                       cudaStream_t stream) {
    dim3 block(32, 8);
    dim3 grid((N + 31) / 32, (M + 7) / 8);
    linear_relu_bf16_naive<<<dim3((N + 127) / 128, (M + 127) / 128), dim3(256), 0, stream>>>(X, W, Y, M, N, K);
}
