// C = A @ B (row-major fp32) with a kTM x kTN register micro-tile per thread. The block's thread
// count is written as the block tile's area over the micro-tile's (kBM * kBN / (kTM * kTN)), and
// the accumulator is zero-initialised by an aggregate; the rows follow blockIdx.y * kBM.
#include <cuda_runtime.h>

constexpr int kBM = 64;
constexpr int kBN = 64;
constexpr int kBK = 8;
constexpr int kTM = 4;
constexpr int kTN = 4;
constexpr int kThreads = kBM * kBN / (kTM * kTN);

__global__ void sgemm_area(const float* __restrict__ A, const float* __restrict__ B, float* __restrict__ C,
                           int M, int N, int K) {
    __shared__ float As[kBM][kBK];
    __shared__ float Bs[kBK][kBN];
    const int lane_col = threadIdx.x % (kBN / kTN);
    const int lane_row = threadIdx.x / (kBN / kTN);
    float acc[kTM][kTN] = {0.f};
    for (int k0 = 0; k0 < K; k0 += kBK) {
        for (int e = threadIdx.x; e < kBM * kBK; e += kThreads) {
            const int r = blockIdx.y * kBM + e / kBK, c = k0 + e % kBK;
            As[e / kBK][e % kBK] = (r < M && c < K) ? A[r * K + c] : 0.f;
        }
        for (int e = threadIdx.x; e < kBK * kBN; e += kThreads) {
            const int r = k0 + e / kBN, c = blockIdx.x * kBN + e % kBN;
            Bs[e / kBN][e % kBN] = (r < K && c < N) ? B[r * N + c] : 0.f;
        }
        __syncthreads();
        for (int kk = 0; kk < kBK; ++kk)
            for (int i = 0; i < kTM; ++i)
                for (int j = 0; j < kTN; ++j)
                    acc[i][j] += As[lane_row * kTM + i][kk] * Bs[kk][lane_col * kTN + j];
        __syncthreads();
    }
    for (int i = 0; i < kTM; ++i)
        for (int j = 0; j < kTN; ++j) {
            const int r = blockIdx.y * kBM + lane_row * kTM + i;
            const int c = blockIdx.x * kBN + lane_col * kTN + j;
            if (r < M && c < N) C[r * N + c] = acc[i][j];
        }
}

extern "C" void launch(const float* A, const float* B, float* C, int M, int N, int K, cudaStream_t stream) {
    const dim3 grid((N + kBN - 1) / kBN, (M + kBM - 1) / kBM);
    sgemm_area<<<grid, kThreads, 0, stream>>>(A, B, C, M, N, K);
}
