// y = x > 0 ? x : x / 8, then + b[column], fp16, one thread per element (early-return idiom,
// 64-bit index spelled with the block size first, the bound computed before the check).
#include <cuda_runtime.h>
#include <cuda_fp16.h>

__global__ void leaky_bias(const __half* in, const __half* b, __half* out, int rows, int cols) {
    size_t t = threadIdx.x + (size_t)blockDim.x * blockIdx.x;
    const size_t total = (size_t)rows * cols;
    if (t >= total) {
        return;
    }
    const float v = __half2float(in[t]);
    const float r = v > 0.0f ? v : 0.125f * v;
    out[t] = __float2half(r + __half2float(b[t % cols]));
}

extern "C" void launch(const __half* in, const __half* b, __half* out, int rows, int cols, cudaStream_t stream) {
    size_t total = (size_t)rows * cols;
    leaky_bias<<<(unsigned)((total + 255) / 256), 256, 0, stream>>>(in, b, out, rows, cols);
}
