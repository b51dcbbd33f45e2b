// C = A @ B (row-major), 1-D thread tiling over an element type T: each thread keeps a column of
// kTM outputs. The tile loaders give every thread the same number of elements, which the
// static_asserts check (each tile holds a whole multiple of the block's threads); operands are
// read into brace-initialized registers.
#include <cuda_runtime.h>

constexpr int kBM = 64;
constexpr int kBN = 64;
constexpr int kBK = 8;
constexpr int kTM = 8;
constexpr int kThreads = kBN * kBM / kTM;

template <typename T>
__global__ void sgemm_loader(const T* __restrict__ A, const T* __restrict__ B, T* __restrict__ C, int M, int N,
                             int K) {
    __shared__ T As[kBM][kBK];
    __shared__ T Bs[kBK][kBN];
    const int col = threadIdx.x % kBN;
    const int row0 = threadIdx.x / kBN * kTM;
    T acc[kTM] = {};
    for (int k0 = 0; k0 < K; k0 += kBK) {
        static_assert(kBM * kBK % kThreads == 0, "A tile: whole loads per thread");
        for (int l = 0; l < kBM * kBK / kThreads; ++l) {
            const int e = threadIdx.x + l * kThreads;
            const int ar = blockIdx.y * kBM + e / kBK, ac = k0 + e % kBK;
            As[e / kBK][e % kBK] = (ar < M && ac < K) ? A[ar * K + ac] : T(0);
        }
        static_assert(kBK * kBN % kThreads == 0, "B tile: whole loads per thread");
        for (int l = 0; l < kBK * kBN / kThreads; ++l) {
            const int e = threadIdx.x + l * kThreads;
            const int br = k0 + e / kBN, bc = blockIdx.x * kBN + e % kBN;
            Bs[e / kBN][e % kBN] = (br < K && bc < N) ? B[br * N + bc] : T(0);
        }
        __syncthreads();
        for (int kk = 0; kk < kBK; ++kk) {
            T const b{Bs[kk][col]};
            for (int i = 0; i < kTM; ++i) {
                T const a{As[row0 + i][kk]};
                acc[i] += a * b;
            }
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
    sgemm_loader<float><<<grid, kThreads, 0, stream>>>(A, B, C, M, N, K);
}
