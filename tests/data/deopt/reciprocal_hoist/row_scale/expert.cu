// Row normalization by the row's L1 norm: the reciprocal of the norm is computed once per row and
// every element is multiplied by it. One block of 128 threads per row.
#include <cuda_runtime.h>

__global__ void __launch_bounds__(128) l1_normalize(const float* __restrict__ x, float* __restrict__ y, int M, int N) {
    __shared__ float partial[128];
    const float* xr = x + (size_t)blockIdx.x * N;
    float s = 0.0f;
    for (int j = threadIdx.x; j < N; j += 128) s += fabsf(xr[j]);
    partial[threadIdx.x] = s;
    __syncthreads();
    for (int w = 64; w > 0; w >>= 1) {
        if (threadIdx.x < w) partial[threadIdx.x] += partial[threadIdx.x + w];
        __syncthreads();
    }
    const float norm = partial[0] + 1.0f;
    const float inv = 1.0f / norm;
    for (int j = threadIdx.x; j < N; j += 128) y[(size_t)blockIdx.x * N + j] = xr[j] * inv;
}

extern "C" void launch(const float* x, float* y, int M, int N, cudaStream_t stream) {
    l1_normalize<<<M, 128, 0, stream>>>(x, y, M, N);
}
