// Row softmax, one block of 256 threads per row. Each reduction runs in two levels: a warp
// butterfly, then lane 0 of every warp parks its partial in a slot and thread 0 folds the slots
// one after another into slot 0, which every thread reads back.
#include <cuda_runtime.h>
#include <math.h>

__device__ float warp_max(float v) {
    for (int d = 16; d > 0; d >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, d));
    return v;
}

__device__ float warp_sum(float v) {
    for (int d = 16; d > 0; d >>= 1) v += __shfl_xor_sync(0xffffffffu, v, d);
    return v;
}

__global__ void row_softmax(const float* x, float* y, int M, int N) {
    __shared__ float parts[8];
    const int row = blockIdx.x;
    const int lane = threadIdx.x % 32;
    const int wid = threadIdx.x / 32;
    const int nwarps = blockDim.x / 32;
    const float* xr = x + (size_t)row * N;
    float* yr = y + (size_t)row * N;

    float hi = -INFINITY;
    for (int j = threadIdx.x; j < N; j += blockDim.x) hi = fmaxf(hi, xr[j]);
    hi = warp_max(hi);
    if (lane == 0) parts[wid] = hi;
    __syncthreads();
    if (threadIdx.x == 0) {
        float m = parts[0];
        for (int w = 1; w < nwarps; ++w) m = fmaxf(m, parts[w]);
        parts[0] = m;
    }
    __syncthreads();
    const float top = parts[0];
    __syncthreads();

    float total = 0.f;
    for (int j = threadIdx.x; j < N; j += blockDim.x) total += expf(xr[j] - top);
    total = warp_sum(total);
    if (lane == 0) parts[wid] = total;
    __syncthreads();
    if (threadIdx.x == 0) {
        float s = parts[0];
        for (int w = 1; w < nwarps; w++) s += parts[w];
        parts[0] = s;
    }
    __syncthreads();
    const float denom = parts[0];

    for (int j = threadIdx.x; j < N; j += blockDim.x) yr[j] = expf(xr[j] - top) / denom;
}

extern "C" void launch(const float* x, float* y, int M, int N, cudaStream_t s) {
    row_softmax<<<M, 256, 0, s>>>(x, y, M, N);
}
