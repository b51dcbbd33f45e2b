// permute_nhwc, naive: one thread per output element (linear index over y in NHWC order),
// reading x with a stride of H*W.
#include <cuda_runtime.h>

__global__ void permute_naive(const float* x, float* y, int B, int C, int H, int W) {
    size_t idx = (size_t)blockIdx.x * blockDim.x + threadIdx.x;  // element of y
    size_t hw = (size_t)H * W;
    size_t image = (size_t)C * hw;
    if (idx >= (size_t)B * image) return;
    size_t b = idx / image;
    size_t r = idx % image;
    size_t p = r / C;  // pixel h*W + w
    size_t c = r % C;  // channel
    y[idx] = x[b * image + c * hw + p];
}

extern "C" void launch(const float* x, float* y, int B, int C, int H, int W, cudaStream_t stream) {
    size_t total = (size_t)B * C * H * W;
    permute_naive<<<(unsigned)((total + 255) / 256), 256, 0, stream>>>(x, y, B, C, H, W);
}
