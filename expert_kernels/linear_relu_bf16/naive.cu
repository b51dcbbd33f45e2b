// linear_relu_bf16, naive: one thread per element of Y, fp32 accumulation over K through global memory.
#include <cuda_runtime.h>
#include <cuda_bf16.h>

__global__ void linear_relu_bf16_naive(const __nv_bfloat16* X, const __nv_bfloat16* W, __nv_bfloat16* Y,
                                       int M, int N, int K) {
    int col = blockIdx.x * blockDim.x + threadIdx.x;
    int row = blockIdx.y * blockDim.y + threadIdx.y;
    if (row >= M || col >= N) return;
    float acc = 0.0f;
    for (int k = 0; k < K; ++k)
        acc += __bfloat162float(X[(size_t)row * K + k]) * __bfloat162float(W[(size_t)col * K + k]);
    Y[(size_t)row * N + col] = __float2bfloat16_rn(fmaxf(acc, 0.0f));
}

extern "C" void launch(const __nv_bfloat16* X, const __nv_bfloat16* W, __nv_bfloat16* Y, int M, int N, int K,
                       cudaStream_t stream) {
    dim3 block(32, 8);
    dim3 grid((N + 31) / 32, (M + 7) / 8);
    linear_relu_bf16_naive<<<grid, block, 0, stream>>>(X, W, Y, M, N, K);
}
