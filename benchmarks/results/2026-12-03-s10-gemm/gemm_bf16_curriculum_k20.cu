// gemm_bf16, naive: one thread per element of C, fp32 accumulation over K through global memory.
#include <cuda_runtime.h>
#include <cuda_bf16.h>

// gemm_bf16_naive: block tile kGemm_bf16_naive_BM x kGemm_bf16_naive_BN, K tile kGemm_bf16_naive_BK, register micro-tile kGemm_bf16_naive_TM x kGemm_bf16_naive_TN
constexpr int kGemm_bf16_naive_BM = 128;
constexpr int kGemm_bf16_naive_BN = 128;
constexpr int kGemm_bf16_naive_BK = 16;
constexpr int kGemm_bf16_naive_TM = 8;
constexpr int kGemm_bf16_naive_TN = 8;

__global__ void gemm_bf16_naive(const __nv_bfloat16* __restrict__  A, const __nv_bfloat16* __restrict__  B, __nv_bfloat16* __restrict__  C,
                                int M, int N, int K) {
    __shared__ float kl_As[kGemm_bf16_naive_BM][kGemm_bf16_naive_BK];
    __shared__ float kl_Bs[kGemm_bf16_naive_BK][kGemm_bf16_naive_BN];
    const int kl_tx = threadIdx.x, kl_ty = threadIdx.y, kl_tid = kl_ty * (kGemm_bf16_naive_BN / kGemm_bf16_naive_TN) + kl_tx;
    const int kl_row0 = blockIdx.y * kGemm_bf16_naive_BM, kl_col0 = blockIdx.x * kGemm_bf16_naive_BN;
    float kl_accum[kGemm_bf16_naive_TM][kGemm_bf16_naive_TN];
    #pragma unroll
    for (int kl_i = 0; kl_i < kGemm_bf16_naive_TM; ++kl_i)
        #pragma unroll
        for (int kl_j = 0; kl_j < kGemm_bf16_naive_TN; ++kl_j) kl_accum[kl_i][kl_j] = 0.0f;
    for (int kl_k0 = 0; kl_k0 < K; kl_k0 += kGemm_bf16_naive_BK) {
        #pragma unroll
        for (int kl_e = kl_tid; kl_e < kGemm_bf16_naive_BM * kGemm_bf16_naive_BK; kl_e += (kGemm_bf16_naive_BM / kGemm_bf16_naive_TM) * (kGemm_bf16_naive_BN / kGemm_bf16_naive_TN)) {
            const int kl_r = kl_e / kGemm_bf16_naive_BK, kl_c = kl_e % kGemm_bf16_naive_BK;
            const int row = kl_row0 + kl_r;
            const int k = kl_k0 + kl_c;
            kl_As[kl_r][kl_c] = (!(row >= M) && (k < K)) ? static_cast<float>(__bfloat162float(__ldg(&A[(size_t)row * K + k]))) : static_cast<float>(0);
        }
        #pragma unroll
        for (int kl_e = kl_tid; kl_e < kGemm_bf16_naive_BK * kGemm_bf16_naive_BN; kl_e += (kGemm_bf16_naive_BM / kGemm_bf16_naive_TM) * (kGemm_bf16_naive_BN / kGemm_bf16_naive_TN)) {
            const int kl_r = kl_e / kGemm_bf16_naive_BN, kl_c = kl_e % kGemm_bf16_naive_BN;
            const int k = kl_k0 + kl_r;
            const int col = kl_col0 + kl_c;
            kl_Bs[kl_r][kl_c] = (!(col >= N) && (k < K)) ? static_cast<float>(__bfloat162float(__ldg(&B[(size_t)k * N + col]))) : static_cast<float>(0);
        }
        __syncthreads();
        #pragma unroll
        for (int kl_kk = 0; kl_kk < kGemm_bf16_naive_BK; ++kl_kk) {
            float kl_a[kGemm_bf16_naive_TM], kl_b[kGemm_bf16_naive_TN];
            #pragma unroll
            for (int kl_i = 0; kl_i < kGemm_bf16_naive_TM; ++kl_i) kl_a[kl_i] = kl_As[kl_ty + kl_i * (kGemm_bf16_naive_BM / kGemm_bf16_naive_TM)][kl_kk];
            #pragma unroll
            for (int kl_j = 0; kl_j < kGemm_bf16_naive_TN; ++kl_j) kl_b[kl_j] = kl_Bs[kl_kk][kl_tx + kl_j * (kGemm_bf16_naive_BN / kGemm_bf16_naive_TN)];
            #pragma unroll
            for (int kl_i = 0; kl_i < kGemm_bf16_naive_TM; ++kl_i)
                #pragma unroll
                for (int kl_j = 0; kl_j < kGemm_bf16_naive_TN; ++kl_j) kl_accum[kl_i][kl_j] += kl_a[kl_i] * kl_b[kl_j];
        }
        __syncthreads();
    }
    #pragma unroll
    for (int kl_i = 0; kl_i < kGemm_bf16_naive_TM; ++kl_i)
        #pragma unroll
        for (int kl_j = 0; kl_j < kGemm_bf16_naive_TN; ++kl_j) {
            const int row = kl_row0 + kl_ty + kl_i * (kGemm_bf16_naive_BM / kGemm_bf16_naive_TM);
            const int col = kl_col0 + kl_tx + kl_j * (kGemm_bf16_naive_BN / kGemm_bf16_naive_TN);
            if (row >= M || col >= N) continue;
            float acc = kl_accum[kl_i][kl_j];
            C[(size_t)row * N + col] = __float2bfloat16_rn(acc);
        }
}

extern "C" void launch(const __nv_bfloat16* A, const __nv_bfloat16* B, __nv_bfloat16* C, int M, int N, int K,
                       cudaStream_t stream) {
    dim3 block(32, 8);
    dim3 grid((N + 31) / 32, (M + 7) / 8);
    gemm_bf16_naive<<<dim3((N + kGemm_bf16_naive_BN - 1) / kGemm_bf16_naive_BN, (M + kGemm_bf16_naive_BM - 1) / kGemm_bf16_naive_BM), dim3(kGemm_bf16_naive_BN / kGemm_bf16_naive_TN, kGemm_bf16_naive_BM / kGemm_bf16_naive_TM), 0, stream>>>(A, B, C, M, N, K);
}
