// C = A Bt^T + bias in half, summed in float: the second operand stored N x K (its reduction
// index is the contiguous one), the column on threadIdx.y, a guard that keeps the in-range threads.
#include <cuda_runtime.h>
#include <cuda_fp16.h>

__global__ void gemm_nt(const __half* A, const __half* Bt, const __half* bias, __half* C, int M, int N, int K) {
    const int n = blockIdx.y * blockDim.y + threadIdx.y;
    const int m = blockIdx.x * blockDim.x + threadIdx.x;
    if (m < M && n < N) {
        float s = 0.f;
        for (int k = 0; k < K; k++) s += __half2float(A[m * K + k]) * __half2float(Bt[n * K + k]);
        C[m * N + n] = __float2half(s + __half2float(bias[n]));
    }
}

extern "C" void launch(const __half* A, const __half* Bt, const __half* bias, __half* C, int M, int N, int K,
                       cudaStream_t stream) {
    dim3 block(16, 16);
    dim3 grid((M + 15) / 16, (N + 15) / 16);
    gemm_nt<<<grid, block, 0, stream>>>(A, Bt, bias, C, M, N, K);
}
