// sgemm, naive: one thread per element of C, a plain loop over K through global memory.
#include <cuda_runtime.h>

// sgemm_naive: block tile kSgemm_naive_BM x kSgemm_naive_BN, K tile kSgemm_naive_BK, register micro-tile kSgemm_naive_TM x kSgemm_naive_TN
constexpr int kSgemm_naive_BM = 128;
constexpr int kSgemm_naive_BN = 128;
constexpr int kSgemm_naive_BK = 16;
constexpr int kSgemm_naive_TM = 8;
constexpr int kSgemm_naive_TN = 8;

__global__ void __launch_bounds__(256, 2) sgemm_naive(const float* __restrict__  A, const float* __restrict__  B, float* __restrict__  C, float alpha, float beta,
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
        // KLineage vectorize: the 2 tiles in 16-byte packs of four floats when all of each is in
        // bounds and its rows are contiguous and 16-byte aligned (one test for all of them, once a K step);
        // otherwise every tile loads as before.
        if (kSgemm_naive_BK % 4 == 0 && [&]() -> bool {
                auto kl_tile_in = [&](const int kl_r, const int kl_c) -> bool {
                    const int row = kl_row0 + kl_r;
                    const int k = kl_k0 + kl_c;
                    return (!(row >= M) && (k < K));
                };
                auto kl_tile_first = [&](const int kl_r, const int kl_c) -> const float* {
                    const int row = kl_row0 + kl_r;
                    const int k = kl_k0 + kl_c;
                    return &A[(size_t)row * K + k];
                };
                return kl_tile_in(0, 0) && kl_tile_in(kSgemm_naive_BM - 1, kSgemm_naive_BK - 1) &&
                       (reinterpret_cast<unsigned long long>(kl_tile_first(0, 0)) % 16u) == 0 && ((size_t)K) % 4 == 0;
            }() &&
            kSgemm_naive_BN % 4 == 0 && [&]() -> bool {
                auto kl_tile_in_2 = [&](const int kl_r, const int kl_c) -> bool {
                    const int k = kl_k0 + kl_r;
                    const int col = kl_col0 + kl_c;
                    return (!(col >= N) && (k < K));
                };
                auto kl_tile_first_2 = [&](const int kl_r, const int kl_c) -> const float* {
                    const int k = kl_k0 + kl_r;
                    const int col = kl_col0 + kl_c;
                    return &B[(size_t)k * N + col];
                };
                return kl_tile_in_2(0, 0) && kl_tile_in_2(kSgemm_naive_BK - 1, kSgemm_naive_BN - 1) &&
                       (reinterpret_cast<unsigned long long>(kl_tile_first_2(0, 0)) % 16u) == 0 && ((size_t)N) % 4 == 0;
            }()) {
            #pragma unroll
            for (int kl_e = kl_tid; kl_e < kSgemm_naive_BM * (kSgemm_naive_BK / 4); kl_e += (kSgemm_naive_BM / kSgemm_naive_TM) * (kSgemm_naive_BN / kSgemm_naive_TN)) {
                const int kl_r = kl_e / (kSgemm_naive_BK / 4);
                const int kl_c = kl_e % (kSgemm_naive_BK / 4) * 4;
                const int row = kl_row0 + kl_r;
                const int k = kl_k0 + kl_c;
                const float4 kl_v = *reinterpret_cast<const float4*>(&A[(size_t)row * K + k]);
                kl_As[(kl_c + 0)][kl_r] = static_cast<float>(kl_v.x);
                kl_As[(kl_c + 1)][kl_r] = static_cast<float>(kl_v.y);
                kl_As[(kl_c + 2)][kl_r] = static_cast<float>(kl_v.z);
                kl_As[(kl_c + 3)][kl_r] = static_cast<float>(kl_v.w);
            }
            #pragma unroll
            for (int kl_e = kl_tid; kl_e < kSgemm_naive_BK * (kSgemm_naive_BN / 4); kl_e += (kSgemm_naive_BM / kSgemm_naive_TM) * (kSgemm_naive_BN / kSgemm_naive_TN)) {
                const int kl_r = kl_e / (kSgemm_naive_BN / 4);
                const int kl_c = kl_e % (kSgemm_naive_BN / 4) * 4;
                const int k = kl_k0 + kl_r;
                const int col = kl_col0 + kl_c;
                const float4 kl_v_2 = *reinterpret_cast<const float4*>(&B[(size_t)k * N + col]);
                kl_Bs[kl_r][(kl_c + 0)] = static_cast<float>(kl_v_2.x);
                kl_Bs[kl_r][(kl_c + 1)] = static_cast<float>(kl_v_2.y);
                kl_Bs[kl_r][(kl_c + 2)] = static_cast<float>(kl_v_2.z);
                kl_Bs[kl_r][(kl_c + 3)] = static_cast<float>(kl_v_2.w);
            }
        } else {
            #pragma unroll
            for (int kl_e = kl_tid; kl_e < kSgemm_naive_BM * kSgemm_naive_BK; kl_e += (kSgemm_naive_BM / kSgemm_naive_TM) * (kSgemm_naive_BN / kSgemm_naive_TN)) {
                const int kl_r = kl_e / kSgemm_naive_BK, kl_c = kl_e % kSgemm_naive_BK;
                const int row = kl_row0 + kl_r;
                const int k = kl_k0 + kl_c;
                kl_As[kl_c][kl_r] = (!(row >= M) && (k < K)) ? static_cast<float>(__ldg(&A[(size_t)row * K + k])) : static_cast<float>(0);
            }
            #pragma unroll
            for (int kl_e = kl_tid; kl_e < kSgemm_naive_BK * kSgemm_naive_BN; kl_e += (kSgemm_naive_BM / kSgemm_naive_TM) * (kSgemm_naive_BN / kSgemm_naive_TN)) {
                const int kl_r = kl_e / kSgemm_naive_BN, kl_c = kl_e % kSgemm_naive_BN;
                const int k = kl_k0 + kl_r;
                const int col = kl_col0 + kl_c;
                kl_Bs[kl_r][kl_c] = (!(col >= N) && (k < K)) ? static_cast<float>(__ldg(&B[(size_t)k * N + col])) : static_cast<float>(0);
            }
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
