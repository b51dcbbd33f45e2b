// The naive side: a grid-stride loop, each bucket index checked against the bucket count.
#include <cuda_runtime.h>

#define NBUCKETS 64

__global__ void bucket_max(const int* bucket, const int* values, int* out, int n) {
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x) {
        const int b = bucket[i];
        if (b < NBUCKETS) atomicMax(&out[b], values[i]);
    }
}

extern "C" void launch(const int* bucket, const int* values, int* out, int n, cudaStream_t stream) {
    cudaMemsetAsync(out, 0, NBUCKETS * sizeof(int), stream);
    bucket_max<<<64, 256, 0, stream>>>(bucket, values, out, n);
}
