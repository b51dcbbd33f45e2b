#include <cuda_runtime.h>
// Two tiles carved out of one dynamic buffer sized at the launch: every row of the block (read by
// all threads, after a barrier) and the thread's own row (read only by the thread that stored it).
__global__ void gram(const float* X, float* G, int D) {
    extern __shared__ float buf[];
    const int tile = blockDim.x * D;
    float* mine = buf;
    float* rows = &buf[tile];
    const int base = blockIdx.x * tile;
    for (int x = 0; x < D; x++) {
        rows[threadIdx.x * D + x] = X[base + threadIdx.x * D + x];
    }
    __syncthreads();
    for (int x = 0; x < D; x++) {
        mine[threadIdx.x * D + x] = X[base + threadIdx.x * D + x];
    }
    for (int u = 0; u < blockDim.x; u++) {
        float acc = 0.0f;
        for (int x = 0; x < D; x++) acc += mine[threadIdx.x * D + x] * rows[u * D + x];
        G[(blockIdx.x * blockDim.x + threadIdx.x) * blockDim.x + u] = acc;
    }
}
extern "C" void launch(const float* X, float* G, int B, int D, cudaStream_t s) {
    gram<<<B, 32, 2 * 32 * D * sizeof(float), s>>>(X, G, D);
}
