// gemm_bf16, naive: one thread per element of C, fp32 accumulation over K through global memory.
#include <cuda_runtime.h>
#include <cuda_bf16.h>

__global__ void gemm_bf16_naive(const __nv_bfloat16* __restrict__  A, const __nv_bfloat16* __restrict__  B, __nv_bfloat16* __restrict__  C,
                                int M, int N, int K) {
    int col = blockIdx.x * blockDim.x + threadIdx.x;
    int row = blockIdx.y * blockDim.y + threadIdx.y;
    if (row >= M || col >= N) return;
    float acc = 0.0f;
    for (int k = 0; k < K; ++k)
        acc += __bfloat162float(__ldg(&A[(size_t)row * K + k])) * __bfloat162float(__ldg(&B[(size_t)k * N + col]));
    C[(size_t)row * N + col] = __float2bfloat16_rn(acc);
}

extern "C" void launch(const __nv_bfloat16* A, const __nv_bfloat16* B, __nv_bfloat16* C, int M, int N, int K,
                       cudaStream_t stream) {
    dim3 block(32, 8);
    dim3 grid((N + 31) / 32, (M + 7) / 8);
    gemm_bf16_naive<<<grid, block, 0, stream>>>(A, B, C, M, N, K);
}
