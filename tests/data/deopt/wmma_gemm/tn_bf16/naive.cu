// C = At^T @ B, bf16 At (K, M) stored k-major and B (K, N), float sum, bf16 C (M, N): tensor_core's
// forward with the first operand contiguous along the output rows (its tile is stored k by k and
// read through ldmatrix.trans).
#include <cuda_runtime.h>
#include <cuda_bf16.h>

__global__ void gemm_tn_bf16(const __nv_bfloat16* At, const __nv_bfloat16* B, __nv_bfloat16* C, int M, int N,
                             int K) {
    int n = blockIdx.x * blockDim.x + threadIdx.x;
    int m = blockIdx.y * blockDim.y + threadIdx.y;
    if (m >= M || n >= N) return;
    float s = 0.0f;
    for (int k = 0; k < K; ++k) s += __bfloat162float(At[(size_t)k * M + m]) * __bfloat162float(B[(size_t)k * N + n]);
    C[(size_t)m * N + n] = __float2bfloat16_rn(s);
}

extern "C" void launch(const __nv_bfloat16* At, const __nv_bfloat16* B, __nv_bfloat16* C, int M, int N, int K,
                       cudaStream_t stream) {
    dim3 block(32, 4);
    dim3 grid((N + 31) / 32, (M + 3) / 4);
    gemm_tn_bf16<<<grid, block, 0, stream>>>(At, B, C, M, N, K);
}
