// softmax_bf16_short, naive: one thread per output element; each re-reads its whole row.
#include <cuda_runtime.h>
#include <cuda_bf16.h>
#include <math.h>

__global__ void softmax_short_naive(const __nv_bfloat16* x, __nv_bfloat16* y, int M, int N) {
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= (size_t)M * N) return;
    const __nv_bfloat16* r = x + (i / N) * N;
    float peak = -INFINITY;
    for (int j = 0; j < N; ++j) peak = fmaxf(peak, __bfloat162float(r[j]));
    float z = 0.0f;
    for (int j = 0; j < N; ++j) z += expf(__bfloat162float(r[j]) - peak);
    y[i] = __float2bfloat16(expf(__bfloat162float(x[i]) - peak) / z);
}

extern "C" void launch(const __nv_bfloat16* x, __nv_bfloat16* y, int M, int N, cudaStream_t stream) {
    const int threads = 256;
    size_t total = (size_t)M * N;
    softmax_short_naive<<<(unsigned)((total + threads - 1) / threads), threads, 0, stream>>>(x, y, M, N);
}
