// 128-bit loads and stores with a scalar tail, read-only path, grid-stride loop sized to the GPU.
#include <cuda_runtime.h>

__global__ void __launch_bounds__(256) add_vec4(const float* __restrict__ a, const float* __restrict__ b,
                                                float* __restrict__ c, int n) {
    const int n4 = n / 4;
    const float4* a4 = reinterpret_cast<const float4*>(a);
    const float4* b4 = reinterpret_cast<const float4*>(b);
    float4* c4 = reinterpret_cast<float4*>(c);
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n4; i += gridDim.x * blockDim.x) {
        float4 x = __ldg(a4 + i), y = __ldg(b4 + i);
        c4[i] = make_float4(x.x + y.x, x.y + y.y, x.z + y.z, x.w + y.w);
    }
    for (int i = 4 * n4 + blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
        c[i] = a[i] + b[i];
}

extern "C" void launch(const float* a, const float* b, float* c, int n, cudaStream_t stream) {
    int blocks = (n / 4 + 255) / 256;
    if (blocks > 132 * 8) blocks = 132 * 8;
    if (blocks < 1) blocks = 1;
    add_vec4<<<blocks, 256, 0, stream>>>(a, b, c, n);
}
