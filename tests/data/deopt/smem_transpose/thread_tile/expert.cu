// C = A @ B (row-major fp32), 2-D thread tiling with the A tile stored transposed: a block of
// kThreads threads computes a kBM x kBN tile, each thread a kTM x kTN micro-tile. Eight threads
// share a row group, so the threads of a warp hold four different row groups: read row-major
// (`As[r][kk]`) their A reads would be kTM * kBK words apart; stored as As[kk][r] they are kTM
// words apart.
#include <cuda_runtime.h>

constexpr int kBM = 32;
constexpr int kBN = 32;
constexpr int kBK = 8;
constexpr int kTM = 4;
constexpr int kTN = 4;
constexpr int kThreads = kBM * kBN / (kTM * kTN);

__global__ void sgemm_tt(const float* __restrict__ A, const float* __restrict__ B, float* __restrict__ C,
                         int M, int N, int K) {
    __shared__ float As[kBK][kBM];
    __shared__ float Bs[kBK][kBN];
    const int tx = threadIdx.x % (kBN / kTN);
    const int ty = threadIdx.x / (kBN / kTN);
    float acc[kTM][kTN] = {};
    for (int k0 = 0; k0 < K; k0 += kBK) {
        for (int e = threadIdx.x; e < kBM * kBK; e += kThreads) {
            const int r = blockIdx.y * kBM + e / kBK, c = k0 + e % kBK;
            As[e % kBK][e / kBK] = (r < M && c < K) ? A[r * K + c] : 0.f;
        }
        for (int e = threadIdx.x; e < kBK * kBN; e += kThreads) {
            const int r = k0 + e / kBN, c = blockIdx.x * kBN + e % kBN;
            Bs[e / kBN][e % kBN] = (r < K && c < N) ? B[r * N + c] : 0.f;
        }
        __syncthreads();
        for (int kk = 0; kk < kBK; ++kk) {
            for (int i = 0; i < kTM; ++i) {
                const float a = As[kk][ty * kTM + i];
                for (int j = 0; j < kTN; ++j) acc[i][j] += a * Bs[kk][tx * kTN + j];
            }
        }
        __syncthreads();
    }
    for (int i = 0; i < kTM; ++i) {
        for (int j = 0; j < kTN; ++j) {
            const int r = blockIdx.y * kBM + ty * kTM + i;
            const int c = blockIdx.x * kBN + tx * kTN + j;
            if (r < M && c < N) C[r * N + c] = acc[i][j];
        }
    }
}

extern "C" void launch(const float* A, const float* B, float* C, int M, int N, int K, cudaStream_t stream) {
    const dim3 grid((N + kBN - 1) / kBN, (M + kBM - 1) / kBM);
    sgemm_tt<<<grid, kThreads, 0, stream>>>(A, B, C, M, N, K);
}
