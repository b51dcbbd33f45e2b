// C = alpha * A @ B, bf16 A (M, K) and B (K, N), float sum, bf16 C (M, N), row-major: tensor_core's
// forward at sizes where whole block tiles and K slices fit (the staging's fast path) and where
// they do not (M, N and K tails).
#include <cuda_runtime.h>
#include <cuda_bf16.h>

__global__ void gemm_nn_bf16(const __nv_bfloat16* A, const __nv_bfloat16* B, __nv_bfloat16* C, float alpha,
                             int M, int N, int K) {
    int col = blockIdx.x * blockDim.x + threadIdx.x;
    int row = blockIdx.y * blockDim.y + threadIdx.y;
    if (row >= M || col >= N) return;
    float acc = 0.0f;
    for (int k = 0; k < K; ++k)
        acc += __bfloat162float(A[(size_t)row * K + k]) * __bfloat162float(B[(size_t)k * N + col]);
    C[(size_t)row * N + col] = __float2bfloat16_rn(alpha * acc);
}

extern "C" void launch(const __nv_bfloat16* A, const __nv_bfloat16* B, __nv_bfloat16* C, float alpha, int M,
                       int N, int K, cudaStream_t stream) {
    dim3 block(16, 16);
    dim3 grid((N + 15) / 16, (M + 15) / 16);
    gemm_nn_bf16<<<grid, block, 0, stream>>>(A, B, C, alpha, M, N, K);
}
