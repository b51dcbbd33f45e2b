// Row softmax, one block per row: each thread keeps an online (running max, rescaled sum) pair
// over its strided elements in one read, the pairs are merged through shared memory, then a
// second sweep writes exp(x - max) / sum.
#include <cuda_runtime.h>
#include <math.h>

constexpr int kThreads = 128;

__global__ void softmax_online_rows(const float* __restrict__ x, float* __restrict__ y, int M, int N) {
    __shared__ float sm[kThreads];
    __shared__ float sd[kThreads];
    const float* xr = x + (size_t)blockIdx.x * N;
    float* yr = y + (size_t)blockIdx.x * N;
    float m = -INFINITY, d = 0.f;
    for (int j = threadIdx.x; j < N; j += kThreads) {
        const float v = xr[j];
        const float mn = fmaxf(m, v);
        d = d * __expf(m - mn) + __expf(v - mn);
        m = mn;
    }
    sm[threadIdx.x] = m;
    sd[threadIdx.x] = d;
    __syncthreads();
    for (int s = kThreads / 2; s > 0; s >>= 1) {
        if (threadIdx.x < s) {
            const float m2 = sm[threadIdx.x + s], d2 = sd[threadIdx.x + s];
            const float m1 = sm[threadIdx.x], d1 = sd[threadIdx.x];
            const float mn = fmaxf(m1, m2);
            sd[threadIdx.x] = (m1 == -INFINITY ? 0.f : d1 * __expf(m1 - mn)) + (m2 == -INFINITY ? 0.f : d2 * __expf(m2 - mn));
            sm[threadIdx.x] = mn;
        }
        __syncthreads();
    }
    const float row_max = sm[0], inv = 1.f / sd[0];
    for (int j = threadIdx.x; j < N; j += kThreads) yr[j] = __expf(xr[j] - row_max) * inv;
}

extern "C" void launch(const float* x, float* y, int M, int N, cudaStream_t stream) {
    softmax_online_rows<<<M, kThreads, 0, stream>>>(x, y, M, N);
}
