// y[r] = population variance of row r: one block per row, each thread a streaming Welford
// (count, mean, M2) over its strided elements in one read, merged across the block with Chan's
// combination through shared memory.
#include <cuda_runtime.h>

constexpr int kThreads = 64;

struct Stats {
    float n, mean, m2;
};

__device__ Stats combine(Stats a, Stats b) {
    const float n = a.n + b.n;
    if (n == 0.f) return a;
    const float delta = b.mean - a.mean, wb = b.n / n;
    Stats r;
    r.n = n;
    r.mean = a.mean + delta * wb;
    r.m2 = a.m2 + b.m2 + delta * delta * a.n * wb;
    return r;
}

__global__ void row_variance(const float* __restrict__ x, float* __restrict__ y, int M, int N) {
    __shared__ Stats part[kThreads];
    const float* xr = x + (size_t)blockIdx.x * N;
    Stats st = {0.f, 0.f, 0.f};
    for (int j = threadIdx.x; j < N; j += kThreads) {
        const float v = xr[j];
        st.n += 1.f;
        const float delta = v - st.mean;
        st.mean += delta / st.n;
        st.m2 += delta * (v - st.mean);
    }
    part[threadIdx.x] = st;
    __syncthreads();
    if (threadIdx.x == 0) {
        Stats t = part[0];
        for (int i = 1; i < kThreads; ++i) t = combine(t, part[i]);
        y[blockIdx.x] = t.m2 / (float)N;
    }
}

extern "C" void launch(const float* x, float* y, int M, int N, cudaStream_t stream) {
    row_variance<<<M, kThreads, 0, stream>>>(x, y, M, N);
}
