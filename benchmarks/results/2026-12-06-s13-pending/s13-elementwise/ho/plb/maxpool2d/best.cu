// maxpool2d, naive: one thread per output element, a 3x3 window scan with padding checks.
#include <cuda_runtime.h>
#include <math.h>

__global__ void __launch_bounds__(256) maxpool3s2_naive(const float*  x, float*  y, int B, int C, int H, int W, int OH, int OW) {
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= (size_t)B * C * OH * OW) return;
    int ow = (int)(i % OW);
    int oh = (int)((i / OW) % OH);
    size_t plane = i / ((size_t)OW * OH);
    const float* src = x + plane * H * W;
    float m = -INFINITY;
    #pragma unroll
    for (int dh = 0; dh < 3; ++dh) {
        int h = oh * 2 - 1 + dh;
        if (h < 0 || h >= H) continue;
        #pragma unroll
        for (int dw = 0; dw < 3; ++dw) {
            int w = ow * 2 - 1 + dw;
            if (w < 0 || w >= W) continue;
            m = fmaxf(m, src[(size_t)h * W + w]);
        }
    }
    y[i] = m;
}

extern "C" void launch(const float* x, float* y, int B, int C, int H, int W, int OH, int OW, cudaStream_t stream) {
    constexpr int threads = 256;
    size_t total = (size_t)B * C * OH * OW;
    maxpool3s2_naive<<<(unsigned)((total + threads - 1) / threads), threads, 0, stream>>>(x, y, B, C, H, W, OH, OW);
}
