// rotary, naive: one thread per output element; each reads its own and its partner element.
#include <cuda_runtime.h>
#include <cuda_fp16.h>

__global__ void rotary_naive(const __half* x, const float* cos, const float* sin, __half* out, int T, int H, int D) {
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= (size_t)T * H * D) return;
    int half = D / 2;
    int d = (int)(i % D);
    size_t t = i / ((size_t)H * D);
    int f = d < half ? d : d - half;
    float c = cos[t * half + f];
    float s = sin[t * half + f];
    float self = __half2float(x[i]);
    float r;
    if (d < half) {
        r = self * c - __half2float(x[i + half]) * s;
    } else {
        r = self * c + __half2float(x[i - half]) * s;
    }
    out[i] = __float2half(r);
}

extern "C" void launch(const __half* x, const float* cos, const float* sin, __half* out, int T, int H, int D,
                       cudaStream_t stream) {
    const int threads = 256;
    size_t total = (size_t)T * H * D;
    rotary_naive<<<(unsigned)((total + threads - 1) / threads), threads, 0, stream>>>(x, cos, sin, out, T, H, D);
}
