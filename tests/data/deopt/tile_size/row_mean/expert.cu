// y[r] = mean_j x[r, j]: a block per row sums with a shared-memory tree (BLOCK threads, fixed at
// the launch), then an elementwise kernel with kThreads threads per block divides by N.
#include <cuda_runtime.h>

constexpr int kThreads = 256;

template <int BLOCK>
__global__ void row_sum_tree(const float* __restrict__ x, float* __restrict__ y, int N) {
    __shared__ float part[BLOCK];
    const float* row = x + (size_t)blockIdx.x * N;
    float acc = 0.f;
    for (int j = threadIdx.x; j < N; j += BLOCK) acc += row[j];
    part[threadIdx.x] = acc;
    __syncthreads();
    for (int s = BLOCK / 2; s > 0; s >>= 1) {
        if (threadIdx.x < s) part[threadIdx.x] += part[threadIdx.x + s];
        __syncthreads();
    }
    if (threadIdx.x == 0) y[blockIdx.x] = part[0];
}

__global__ void __launch_bounds__(kThreads) divide_by(float* __restrict__ y, int M, int N) {
    const int i = blockIdx.x * kThreads + threadIdx.x;
    if (i < M) y[i] = y[i] / (float)N;
}

extern "C" void launch(const float* x, float* y, int M, int N, cudaStream_t stream) {
    row_sum_tree<256><<<M, 256, 0, stream>>>(x, y, N);
    divide_by<<<(M + kThreads - 1) / kThreads, kThreads, 0, stream>>>(y, M, N);
}
