#include <cuda_runtime.h>
#include <math.h>
// A warp per row: the block's threads are tested against the row length before the lanes merge
// their (max, sum) pairs over shuffles; the merged pair is taken from lane 0.
__global__ void rows_warp(const float* x, float* y, int M, int N) {
    const int rows_per_block = blockDim.x / 32;
    int t = threadIdx.x;
    if (t >= N) {
        return;
    }
    int w = t / 32;
    int lane = t % 32;
    int row = blockIdx.x * rows_per_block + w;
    if (row >= M) return;
    const float* xr = x + (size_t)row * N;
    float m = -INFINITY, s = 0.0f;
    for (int j = lane; j < N; j += 32) {
        float v = xr[j];
        float nm = fmaxf(m, v);
        s = s * expf(m - nm) + expf(v - nm);
        m = nm;
    }
    float om, os;
    for (int off = 16; off > 0; off >>= 1) {
        __syncwarp();
        om = __shfl_down_sync(0xffffffff, m, off);
        os = __shfl_down_sync(0xffffffff, s, off);
        float nm = fmaxf(m, om);
        s = s * expf(m - nm) + os * expf(om - nm);
        m = nm;
    }
    m = __shfl_sync(0xffffffff, m, 0);
    s = __shfl_sync(0xffffffff, s, 0);
    for (int j = lane; j < N; j += 32) y[(size_t)row * N + j] = expf(xr[j] - m) / s;
}
extern "C" void launch(const float* x, float* y, int M, int N, cudaStream_t stream) {
    rows_warp<<<(M * 32 + 255) / 256, 256, 0, stream>>>(x, y, M, N);
}
