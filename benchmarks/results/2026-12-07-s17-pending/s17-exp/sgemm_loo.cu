// sgemm, naive: one thread per element of C, a plain loop over K through global memory.
#include <cuda_runtime.h>

// sgemm_naive: block tile kSgemm_naive_BM x kSgemm_naive_BN, K tile kSgemm_naive_BK, register micro-tile kSgemm_naive_TM x kSgemm_naive_TN
constexpr int kSgemm_naive_BM = 128;
constexpr int kSgemm_naive_BN = 128;
constexpr int kSgemm_naive_BK = 16;
constexpr int kSgemm_naive_TM = 8;
constexpr int kSgemm_naive_TN = 8;

__global__ void sgemm_naive(const float* A, const float* B, float* C, float alpha, float beta,
                            int M, int N, int K) {
    __shared__ __align__(16) float kl_As[kSgemm_naive_BK][kSgemm_naive_BM + 4];
    __shared__ __align__(16) float kl_Bs[kSgemm_naive_BK][kSgemm_naive_BN];
    const int kl_tx = threadIdx.x, kl_ty = threadIdx.y, kl_tid = kl_ty * (kSgemm_naive_BN / kSgemm_naive_TN) + kl_tx;
    // a thread's micro-tile rows (columns) in groups of 4 adjacent ones when its size allows:
    // each group is read from shared memory as one 16-byte load
    constexpr int kl_vm = kSgemm_naive_TM % 4 == 0 ? 4 : 1, kl_vn = kSgemm_naive_TN % 4 == 0 ? 4 : 1;
    const int kl_row0 = blockIdx.y * kSgemm_naive_BM, kl_col0 = blockIdx.x * kSgemm_naive_BN;
    float kl_accum[kSgemm_naive_TM][kSgemm_naive_TN];
    #pragma unroll
    for (int kl_i = 0; kl_i < kSgemm_naive_TM; ++kl_i)
        #pragma unroll
        for (int kl_j = 0; kl_j < kSgemm_naive_TN; ++kl_j) kl_accum[kl_i][kl_j] = 0.0f;
    for (int kl_k0 = 0; kl_k0 < K; kl_k0 += kSgemm_naive_BK) {
        #pragma unroll
        for (int kl_e = kl_tid; kl_e < kSgemm_naive_BM * kSgemm_naive_BK; kl_e += (kSgemm_naive_BM / kSgemm_naive_TM) * (kSgemm_naive_BN / kSgemm_naive_TN)) {
            const int kl_r = kl_e / kSgemm_naive_BK, kl_c = kl_e % kSgemm_naive_BK;
            const int row = kl_row0 + kl_r;
            const int k = kl_k0 + kl_c;
            kl_As[kl_c][kl_r] = (!(row >= M) && (k < K)) ? static_cast<float>(A[(size_t)row * K + k]) : static_cast<float>(0);
        }
        #pragma unroll
        for (int kl_e = kl_tid; kl_e < kSgemm_naive_BK * kSgemm_naive_BN; kl_e += (kSgemm_naive_BM / kSgemm_naive_TM) * (kSgemm_naive_BN / kSgemm_naive_TN)) {
            const int kl_r = kl_e / kSgemm_naive_BN, kl_c = kl_e % kSgemm_naive_BN;
            const int k = kl_k0 + kl_r;
            const int col = kl_col0 + kl_c;
            kl_Bs[kl_r][kl_c] = (!(col >= N) && (k < K)) ? static_cast<float>(B[(size_t)k * N + col]) : static_cast<float>(0);
        }
        __syncthreads();
        #pragma unroll
        for (int kl_kk = 0; kl_kk < kSgemm_naive_BK; ++kl_kk) {
            float kl_a[kSgemm_naive_TM], kl_b[kSgemm_naive_TN];
            #pragma unroll
            for (int kl_i = 0; kl_i < kSgemm_naive_TM; ++kl_i) kl_a[kl_i] = kl_As[kl_kk][kl_ty * kl_vm + (kl_i / kl_vm) * (kSgemm_naive_BM / kSgemm_naive_TM * kl_vm) + kl_i % kl_vm];
            #pragma unroll
            for (int kl_j = 0; kl_j < kSgemm_naive_TN; ++kl_j) kl_b[kl_j] = kl_Bs[kl_kk][kl_tx * kl_vn + (kl_j / kl_vn) * (kSgemm_naive_BN / kSgemm_naive_TN * kl_vn) + kl_j % kl_vn];
            #pragma unroll
            for (int kl_i = 0; kl_i < kSgemm_naive_TM; ++kl_i)
                #pragma unroll
                for (int kl_j = 0; kl_j < kSgemm_naive_TN; ++kl_j) kl_accum[kl_i][kl_j] += kl_a[kl_i] * kl_b[kl_j];
        }
        __syncthreads();
    }
    #pragma unroll
    for (int kl_i = 0; kl_i < kSgemm_naive_TM; ++kl_i)
        #pragma unroll
        for (int kl_j = 0; kl_j < kSgemm_naive_TN; ++kl_j) {
            const int row = kl_row0 + kl_ty * kl_vm + (kl_i / kl_vm) * (kSgemm_naive_BM / kSgemm_naive_TM * kl_vm) + kl_i % kl_vm;
            const int col = kl_col0 + kl_tx * kl_vn + (kl_j / kl_vn) * (kSgemm_naive_BN / kSgemm_naive_TN * kl_vn) + kl_j % kl_vn;
            if (row >= M || col >= N) continue;
            float acc = kl_accum[kl_i][kl_j];
            size_t i = (size_t)row * N + col;
            C[i] = beta == 0.0f ? alpha * acc : alpha * acc + beta * C[i];
        }
}

extern "C" void launch(const float* A, const float* B, float* C, float alpha, float beta, int M, int N,
                       int K, cudaStream_t stream) {
    dim3 block(32, 8);
    dim3 grid((N + 31) / 32, (M + 7) / 8);
    sgemm_naive<<<dim3((N + kSgemm_naive_BN - 1) / kSgemm_naive_BN, (M + kSgemm_naive_BM - 1) / kSgemm_naive_BM), dim3(kSgemm_naive_BN / kSgemm_naive_TN, kSgemm_naive_BM / kSgemm_naive_TM), 0, stream>>>(A, B, C, alpha, beta, M, N, K);
}
