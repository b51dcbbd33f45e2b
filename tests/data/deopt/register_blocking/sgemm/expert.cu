// C = A @ B (row-major fp32), shared-memory tiles of kBM x kBK and kBK x kBN, and a kTM x kTN
// register micro-tile per thread: each value read from shared memory feeds kTM or kTN FMAs.
#include <cuda_runtime.h>

constexpr int kBM = 64;
constexpr int kBN = 64;
constexpr int kBK = 8;
constexpr int kTM = 4;
constexpr int kTN = 4;
constexpr int kThreads = (kBM / kTM) * (kBN / kTN);

__global__ void __launch_bounds__(kThreads)
sgemm_reg_tile(const float* __restrict__ A, const float* __restrict__ B, float* __restrict__ C, int M, int N, int K) {
    __shared__ float As[kBK][kBM];
    __shared__ float Bs[kBK][kBN];
    const int tid = threadIdx.x;
    const int tx = tid % (kBN / kTN), ty = tid / (kBN / kTN);
    const int row0 = blockIdx.y * kBM, col0 = blockIdx.x * kBN;
    float acc[kTM][kTN];
#pragma unroll
    for (int i = 0; i < kTM; ++i)
#pragma unroll
        for (int j = 0; j < kTN; ++j) acc[i][j] = 0.f;
    for (int k0 = 0; k0 < K; k0 += kBK) {
        for (int e = tid; e < kBM * kBK; e += kThreads) {
            const int r = e / kBK, c = e % kBK, gr = row0 + r, gc = k0 + c;
            As[c][r] = (gr < M && gc < K) ? A[(size_t)gr * K + gc] : 0.f;
        }
        for (int e = tid; e < kBK * kBN; e += kThreads) {
            const int r = e / kBN, c = e % kBN, gr = k0 + r, gc = col0 + c;
            Bs[r][c] = (gr < K && gc < N) ? B[(size_t)gr * N + gc] : 0.f;
        }
        __syncthreads();
#pragma unroll
        for (int kk = 0; kk < kBK; ++kk) {
            float a[kTM], b[kTN];
#pragma unroll
            for (int i = 0; i < kTM; ++i) a[i] = As[kk][ty * kTM + i];
#pragma unroll
            for (int j = 0; j < kTN; ++j) b[j] = Bs[kk][tx * kTN + j];
#pragma unroll
            for (int i = 0; i < kTM; ++i)
#pragma unroll
                for (int j = 0; j < kTN; ++j) acc[i][j] += a[i] * b[j];
        }
        __syncthreads();
    }
#pragma unroll
    for (int i = 0; i < kTM; ++i)
#pragma unroll
        for (int j = 0; j < kTN; ++j) {
            const int r = row0 + ty * kTM + i, c = col0 + tx * kTN + j;
            if (r < M && c < N) C[(size_t)r * N + c] = acc[i][j];
        }
}

extern "C" void launch(const float* A, const float* B, float* C, int M, int N, int K, cudaStream_t stream) {
    const dim3 grid((N + kBN - 1) / kBN, (M + kBM - 1) / kBM);
    sgemm_reg_tile<<<grid, kThreads, 0, stream>>>(A, B, C, M, N, K);
}
