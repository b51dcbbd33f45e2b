// C = A @ B (row-major fp32), 1-D thread tiling: each thread keeps a column of kTM outputs in
// registers (`acc[kTM]`), reusing the B element it reads once per k step for all kTM rows. The
// block tile kBM x kBN is split among kBM * kBN / kTM threads.
#include <cuda_runtime.h>

constexpr int kBM = 64;
constexpr int kBN = 64;
constexpr int kBK = 8;
constexpr int kTM = 8;
constexpr int kThreads = kBN * kBM / kTM;

__global__ void sgemm_column(const float* __restrict__ A, const float* __restrict__ B, float* __restrict__ C,
                             int M, int N, int K) {
    __shared__ float As[kBM][kBK];
    __shared__ float Bs[kBK][kBN];
    const int col = threadIdx.x % kBN;
    const int row0 = threadIdx.x / kBN * kTM;
    float acc[kTM] = {0.f};
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
        for (int kk = 0; kk < kBK; ++kk) {
            const float b = Bs[kk][col];
            for (int i = 0; i < kTM; ++i) acc[i] += As[row0 + i][kk] * b;
        }
        __syncthreads();
    }
    for (int i = 0; i < kTM; ++i) {
        const int r = blockIdx.y * kBM + row0 + i;
        const int c = blockIdx.x * kBN + col;
        if (r < M && c < N) C[r * N + c] = acc[i];
    }
}

extern "C" void launch(const float* A, const float* B, float* C, int M, int N, int K, cudaStream_t stream) {
    const dim3 grid((N + kBN - 1) / kBN, (M + kBM - 1) / kBM);
    sgemm_column<<<grid, kThreads, 0, stream>>>(A, B, C, M, N, K);
}
