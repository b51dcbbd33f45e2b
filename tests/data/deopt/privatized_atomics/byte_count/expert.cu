// The naive side: one key per thread, added straight into the global counts (pointer arithmetic).
#include <cuda_runtime.h>

__global__ void zero_counts(int* counts) {
    for (int v = threadIdx.x; v < 256; v += blockDim.x) counts[v] = 0;
}

__global__ void count_keys(const unsigned char* keys, int* counts, int n) {
    const int t = threadIdx.x + blockIdx.x * blockDim.x;
    if (t >= n) return;
    atomicAdd(counts + keys[t], 1);
}

extern "C" void launch(const unsigned char* keys, int* counts, int n, cudaStream_t stream) {
    zero_counts<<<1, 128, 0, stream>>>(counts);
    const int block = 128;
    count_keys<<<(n + block - 1) / block, block, 0, stream>>>(keys, counts, n);
}
