// LayerNorm, fp32, one block of 256 threads per row. Each thread sums x and x*x over its strided
// columns; every warp reduces its lanes, parks the two partials in one slot per warp, and after
// the barrier every warp re-reduces the slots, so all threads hold the row's totals.
#include <cuda_runtime.h>
#include <math.h>

__device__ float lane_total(float v) {
    for (int d = 16; d > 0; d >>= 1) v += __shfl_xor_sync(0xffffffffu, v, d);
    return v;
}

__global__ void ln_rows(const float* x, const float* gamma, const float* beta, float* y, int M, int N,
                        float eps) {
    __shared__ float part_s[32];
    __shared__ float part_q[32];
    const int row = blockIdx.x;
    const int lane = threadIdx.x % 32;
    const int wid = threadIdx.x / 32;
    const int nwarps = blockDim.x / 32;
    const float* xr = x + (size_t)row * N;
    float* yr = y + (size_t)row * N;

    float s = 0.f, q = 0.f;
    for (int c = threadIdx.x; c < N; c += blockDim.x) {
        const float v = xr[c];
        s += v;
        q += v * v;
    }
    float ws = lane_total(s);
    float wq = lane_total(q);
    part_s[wid] = ws;
    part_q[wid] = wq;
    __syncthreads();
    ws = lane < nwarps ? part_s[lane] : 0.f;
    wq = lane < nwarps ? part_q[lane] : 0.f;
    const float mean = lane_total(ws) / N;
    const float var = lane_total(wq) / N - mean * mean;
    const float inv = rsqrtf(var + eps);
    for (int c = threadIdx.x; c < N; c += blockDim.x) yr[c] = (xr[c] - mean) * inv * gamma[c] + beta[c];
}

extern "C" void launch(const float* x, const float* gamma, const float* beta, float* y, int M, int N,
                       float eps, cudaStream_t st) {
    ln_rows<<<M, 256, 0, st>>>(x, gamma, beta, y, M, N, eps);
}
