// y = A x for fp32 A (M x K): one thread per row, x staged through shared memory in chunks of TK,
// double-buffered: while the block computes on chunk t, the async copies (cp.async through
// __pipeline_memcpy_async) of chunk t + 1 are in flight into the other buffer.
#include <cuda_runtime.h>
#include <cuda_pipeline.h>

#define TK 64

__global__ void __launch_bounds__(TK) gemv_pingpong(const float* __restrict__ A, const float* __restrict__ x,
                                                    float* __restrict__ y, int M, int K) {
    __shared__ float xs[2][TK];
    const int row = blockIdx.x * TK + threadIdx.x;
    const int nt = (K + TK - 1) / TK;
    if (threadIdx.x < K) __pipeline_memcpy_async(&xs[0][threadIdx.x], &x[threadIdx.x], sizeof(float));
    else xs[0][threadIdx.x] = 0.0f;
    __pipeline_commit();
    __pipeline_wait_prior(0);
    __syncthreads();
    float acc = 0.0f;
    for (int t = 0; t < nt; ++t) {
        const int cur = t & 1;
        if (t + 1 < nt) {
            const int k = (t + 1) * TK + threadIdx.x;
            if (k < K) __pipeline_memcpy_async(&xs[cur ^ 1][threadIdx.x], &x[k], sizeof(float));
            else xs[cur ^ 1][threadIdx.x] = 0.0f;
            __pipeline_commit();
        }
        if (row < M) {
            for (int j = 0; j < TK; ++j) {
                const int k = t * TK + j;
                if (k < K) acc += A[(size_t)row * K + k] * xs[cur][j];
            }
        }
        __pipeline_wait_prior(0);
        __syncthreads();
    }
    if (row < M) y[row] = acc;
}

extern "C" void launch(const float* A, const float* x, float* y, int M, int K, cudaStream_t stream) {
    gemv_pingpong<<<(M + TK - 1) / TK, TK, 0, stream>>>(A, x, y, M, K);
}
