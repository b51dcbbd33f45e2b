// transpose_tiny_batched, naive: one thread per output element in a flat 1-D grid.
#include <cuda_runtime.h>

__global__ void tiny_transpose_naive(const float* x, float* y, int B, int R, int C) {
    size_t o = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    size_t per = (size_t)R * C;
    if (o >= (size_t)B * per) return;
    size_t b = o / per;
    size_t rem = o % per;
    size_t c = rem / R;  // row of y[b]
    size_t r = rem % R;  // column of y[b]
    y[o] = x[b * per + r * C + c];
}

extern "C" void launch(const float* x, float* y, int B, int R, int C, cudaStream_t stream) {
    const int threads = 256;
    size_t total = (size_t)B * R * C;
    tiny_transpose_naive<<<(unsigned)((total + threads - 1) / threads), threads, 0, stream>>>(x, y, B, R, C);
}
