// C = A B, fp16 inputs, fp32 output: one thread per element of C, a straight loop over K.
#include <cuda_runtime.h>
#include <cuda_fp16.h>

__global__ void gemm_naive(const __half* A, const __half* B, float* C, int M, int N, int K) {
    const int n = blockIdx.x * blockDim.x + threadIdx.x, m = blockIdx.y;
    if (n >= N || m >= M) return;
    float s = 0.f;
    for (int k = 0; k < K; ++k) s += __half2float(A[(size_t)m * K + k]) * __half2float(B[(size_t)k * N + n]);
    C[(size_t)m * N + n] = s;
}

extern "C" void launch(const __half* A, const __half* B, float* C, int M, int N, int K, cudaStream_t stream) {
    gemm_naive<<<dim3((N + 127) / 128, M), 128, 0, stream>>>(A, B, C, M, N, K);
}
