// C = A B for fp32 row-major A (M x K), B (K x N): 16 x 16 output tile per block, the A and B
// tiles of each K step staged in shared memory (each element loaded once per block, reused 16 times).
#include <cuda_runtime.h>

constexpr int T = 16;

__global__ void __launch_bounds__(256) sgemm_tiled(const float* __restrict__ A, const float* __restrict__ B,
                                                   float* __restrict__ C, int M, int N, int K) {
    __shared__ float As[T][T];
    __shared__ float Bs[T][T];
    const int tx = threadIdx.x, ty = threadIdx.y;
    const int row = blockIdx.y * T + ty, col = blockIdx.x * T + tx;
    float acc = 0.0f;
    for (int k0 = 0; k0 < K; k0 += T) {
        As[ty][tx] = (row < M && k0 + tx < K) ? A[(size_t)row * K + k0 + tx] : 0.0f;
        Bs[ty][tx] = (k0 + ty < K && col < N) ? B[(size_t)(k0 + ty) * N + col] : 0.0f;
        __syncthreads();
#pragma unroll
        for (int k = 0; k < T; ++k) acc += As[ty][k] * Bs[k][tx];
        __syncthreads();
    }
    if (row < M && col < N) C[(size_t)row * N + col] = acc;
}

extern "C" void launch(const float* A, const float* B, float* C, int M, int N, int K, cudaStream_t stream) {
    const dim3 grid((N + T - 1) / T, (M + T - 1) / T);
    sgemm_tiled<<<grid, dim3(T, T), 0, stream>>>(A, B, C, M, N, K);
}
