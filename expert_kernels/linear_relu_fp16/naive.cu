// linear_relu_fp16, naive: one thread per element of Y, fp32 accumulation over K through global memory.
#include <cuda_runtime.h>
#include <cuda_fp16.h>

__global__ void linear_relu_fp16_naive(const __half* X, const __half* W, __half* Y, int M, int N, int K) {
    int col = blockIdx.x * blockDim.x + threadIdx.x;
    int row = blockIdx.y * blockDim.y + threadIdx.y;
    if (row >= M || col >= N) return;
    float acc = 0.0f;
    for (int k = 0; k < K; ++k)
        acc += __half2float(X[(size_t)row * K + k]) * __half2float(W[(size_t)col * K + k]);
    Y[(size_t)row * N + col] = __float2half_rn(fmaxf(acc, 0.0f));
}

extern "C" void launch(const __half* X, const __half* W, __half* Y, int M, int N, int K, cudaStream_t stream) {
    dim3 block(32, 8);
    dim3 grid((N + 31) / 32, (M + 7) / 8);
    linear_relu_fp16_naive<<<grid, block, 0, stream>>>(X, W, Y, M, N, K);
}
