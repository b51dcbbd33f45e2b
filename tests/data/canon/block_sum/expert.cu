// Written for KLineage's tests: a block-sum in the spellings other authors use.
#include <cuda_runtime.h>
#include <cooperative_groups.h>
namespace cg = cooperative_groups;

#define NUM_BLOCKS 8
enum { THREADS = 128 };

template <unsigned int kBlock>
__global__ void partial_sums(const float* x, float* partial, unsigned int n) {
    cg::thread_block block = cg::this_thread_block();
    __shared__ float buf[kBlock];
    unsigned int t = threadIdx.x;
    unsigned int idx = threadIdx.x + blockIdx.x * kBlock;
    const unsigned int step = kBlock * gridDim.x;
    float acc = 0.0f;
    while (idx < n) {
        acc += x[idx];
        idx += step;
    }
    buf[t] = acc;
    block.sync();
    for (unsigned int s = kBlock / 2; s > 0; s >>= 1) {
        if (t < s) buf[t] += buf[t + s];
        cg::sync(block);
    }
    if (t == 0) partial[blockIdx.x] = buf[0];
}

__global__ void finish(const float* partial, float* out, int count) {
    int i = threadIdx.x;
    if (i < 1) {
        float s = 0.0f;
        for (int k = 0; k < count; ++k) s += partial[k];
        out[0] = s;
    }
}

extern "C" void launch(const float* x, float* out, float* partial, int n, cudaStream_t stream) {
    dim3 gridDim(NUM_BLOCKS);
    dim3 blockDim(THREADS);
    partial_sums<THREADS><<<gridDim, blockDim, 0, stream>>>(x, partial, n);
    finish<<<1, 32, 0, stream>>>(partial, out, NUM_BLOCKS);
}
