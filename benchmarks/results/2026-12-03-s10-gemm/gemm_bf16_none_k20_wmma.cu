// gemm_bf16, naive: one thread per element of C, fp32 accumulation over K through global memory.
#include <cuda_runtime.h>
#include <cuda_bf16.h>
#include <mma.h>

__global__ void gemm_bf16_naive(const __nv_bfloat16* __restrict__  A, const __nv_bfloat16* __restrict__  B, __nv_bfloat16* __restrict__  C,
                                int M, int N, int K) {
    __shared__ __align__(32) __nv_bfloat16 kl_As[128][40];
    __shared__ __align__(32) __nv_bfloat16 kl_Bs[32][136];
    __shared__ __align__(32) float kl_Ws[8][16][24];
    const int kl_warp = threadIdx.x / 32, kl_lane = threadIdx.x % 32;
    const int kl_wm = (kl_warp / 2) * 32, kl_wn = (kl_warp % 2) * 64;
    const int kl_row0 = blockIdx.y * 128, kl_col0 = blockIdx.x * 128;
    nvcuda::wmma::fragment<nvcuda::wmma::accumulator, 16, 16, 16, float> kl_acc[2][4];
    #pragma unroll
    for (int kl_i = 0; kl_i < 2; ++kl_i)
        #pragma unroll
        for (int kl_j = 0; kl_j < 4; ++kl_j) nvcuda::wmma::fill_fragment(kl_acc[kl_i][kl_j], 0.0f);
    for (int kl_k0 = 0; kl_k0 < K; kl_k0 += 32) {
        #pragma unroll
        for (int kl_e = threadIdx.x; kl_e < 4096; kl_e += 256) {
            const int kl_r = kl_e / 32, kl_c = kl_e % 32;
            const int row = kl_row0 + kl_r;
            const int k = kl_k0 + kl_c;
            kl_As[kl_r][kl_c] = (!(row >= M) && (k < K)) ? __ldg(&A[(size_t)row * K + k]) : __float2bfloat16(0.0f);
        }
        #pragma unroll
        for (int kl_e = threadIdx.x; kl_e < 4096; kl_e += 256) {
            const int kl_r = kl_e / 128, kl_c = kl_e % 128;
            const int k = kl_k0 + kl_r;
            const int col = kl_col0 + kl_c;
            kl_Bs[kl_r][kl_c] = (!(col >= N) && (k < K)) ? __ldg(&B[(size_t)k * N + col]) : __float2bfloat16(0.0f);
        }
        __syncthreads();
        #pragma unroll
        for (int kl_kk = 0; kl_kk < 32; kl_kk += 16) {
            nvcuda::wmma::fragment<nvcuda::wmma::matrix_a, 16, 16, 16, __nv_bfloat16, nvcuda::wmma::row_major> kl_a[2];
            nvcuda::wmma::fragment<nvcuda::wmma::matrix_b, 16, 16, 16, __nv_bfloat16, nvcuda::wmma::row_major> kl_b[4];
            #pragma unroll
            for (int kl_i = 0; kl_i < 2; ++kl_i) nvcuda::wmma::load_matrix_sync(kl_a[kl_i], &kl_As[kl_wm + kl_i * 16][kl_kk], 40);
            #pragma unroll
            for (int kl_j = 0; kl_j < 4; ++kl_j) nvcuda::wmma::load_matrix_sync(kl_b[kl_j], &kl_Bs[kl_kk][kl_wn + kl_j * 16], 136);
            #pragma unroll
            for (int kl_i = 0; kl_i < 2; ++kl_i)
                #pragma unroll
                for (int kl_j = 0; kl_j < 4; ++kl_j) nvcuda::wmma::mma_sync(kl_acc[kl_i][kl_j], kl_a[kl_i], kl_b[kl_j], kl_acc[kl_i][kl_j]);
        }
        __syncthreads();
    }
    #pragma unroll
    for (int kl_i = 0; kl_i < 2; ++kl_i)
        #pragma unroll
        for (int kl_j = 0; kl_j < 4; ++kl_j) {
            nvcuda::wmma::store_matrix_sync(&kl_Ws[kl_warp][0][0], kl_acc[kl_i][kl_j], 24, nvcuda::wmma::mem_row_major);
            __syncwarp();
            #pragma unroll
            for (int kl_e = kl_lane; kl_e < 256; kl_e += 32) {
                const int row = kl_row0 + kl_wm + kl_i * 16 + kl_e / 16;
                const int col = kl_col0 + kl_wn + kl_j * 16 + kl_e % 16;
                if (row >= M || col >= N) continue;
                float acc = kl_Ws[kl_warp][kl_e / 16][kl_e % 16];
                C[(size_t)row * N + col] = __float2bfloat16_rn(acc);
            }
            __syncwarp();
        }
}

extern "C" void launch(const __nv_bfloat16* A, const __nv_bfloat16* B, __nv_bfloat16* C, int M, int N, int K,
                       cudaStream_t stream) {
    dim3 block(32, 8);
    dim3 grid((N + 31) / 32, (M + 7) / 8);
    gemm_bf16_naive<<<dim3((N + 127) / 128, (M + 127) / 128), dim3(256), 0, stream>>>(A, B, C, M, N, K);
}
