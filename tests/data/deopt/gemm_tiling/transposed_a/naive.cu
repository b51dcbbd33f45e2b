// C = alpha * A^T B with A stored K x M (a transposed operand: its reduction index is the slow
// one), a while loop over k, size_t indices and an epilogue that scales.
#include <cuda_runtime.h>

__global__ void gemm_tn(const float* __restrict__ At, const float* __restrict__ B, float* __restrict__ C,
                        float alpha, int M, int N, int K) {
    int i = blockIdx.y * blockDim.y + threadIdx.y;
    int j = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= M) return;
    if (j >= N) return;
    double sum = 0.0;
    int kk = 0;
    while (kk < K) {
        sum += (double)At[(size_t)kk * M + i] * (double)B[(size_t)kk * N + j];
        ++kk;
    }
    C[(size_t)i * N + j] = alpha * (float)sum;
}

extern "C" void launch(const float* At, const float* B, float* C, float alpha, int M, int N, int K,
                       cudaStream_t stream) {
    dim3 block(32, 4);
    dim3 grid((N + block.x - 1) / block.x, (M + block.y - 1) / block.y);
    gemm_tn<<<grid, block, 0, stream>>>(At, B, C, alpha, M, N, K);
}
