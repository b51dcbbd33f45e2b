// swiglu, naive: one thread per output element, fp32 math.
#include <cuda_runtime.h>
#include <cuda_bf16.h>
#include <math.h>

__global__ void swiglu_naive(const __nv_bfloat16* gate, const __nv_bfloat16* up, __nv_bfloat16* y, int M, int N) {
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= (size_t)M * N) return;
    float g = __bfloat162float(gate[i]);
    float u = __bfloat162float(up[i]);
    float s = g / (1.0f + expf(-g));
    y[i] = __float2bfloat16(s * u);
}

extern "C" void launch(const __nv_bfloat16* gate, const __nv_bfloat16* up, __nv_bfloat16* y, int M, int N,
                       cudaStream_t stream) {
    const int threads = 256;
    size_t total = (size_t)M * N;
    swiglu_naive<<<(unsigned)((total + threads - 1) / threads), threads, 0, stream>>>(gate, up, y, M, N);
}
