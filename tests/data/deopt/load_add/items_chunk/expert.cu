// Written for KLineage's tests: sums of 512-element chunks; each thread adds ITEMS elements while it
// loads (a template loop), then the block folds its threads' values with a shared-memory tree.
#include <cuda_runtime.h>

template <int THREADS, int ITEMS>
__global__ void chunk_totals(const float* __restrict__ in, float* __restrict__ totals) {
    __shared__ float part[THREADS];
    const int me = threadIdx.x;
    const int base = blockIdx.x * (THREADS * ITEMS) + threadIdx.x;
    float acc = 0.0f;
#pragma unroll
    for (int it = 0; it < ITEMS; ++it) acc += in[base + it * THREADS];
    part[me] = acc;
    __syncthreads();
    for (int half = THREADS / 2; half > 0; half >>= 1) {
        if (me < half) part[me] += part[me + half];
        __syncthreads();
    }
    if (me == 0) totals[blockIdx.x] = part[0];
}

extern "C" void launch(const float* x, float* out, int N, int B, cudaStream_t stream) {
    chunk_totals<128, 4><<<B, 128, 0, stream>>>(x, out);
}
