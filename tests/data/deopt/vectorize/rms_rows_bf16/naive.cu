// y[row] = sqrt(mean(x[row, :]^2)), bf16 in, fp32 out: a warp per row, the lane taken modulo 32,
// a row pointer, the warp's sum folded with shuffles down to lane 0.
#include <cuda_runtime.h>
#include <cuda_bf16.h>

__global__ void rms_rows(const __nv_bfloat16* __restrict__ x, float* __restrict__ y, int m, int n) {
    const int warp = (blockIdx.x * blockDim.x + threadIdx.x) / 32;
    const int lane = threadIdx.x % 32;
    if (warp >= m) return;
    const __nv_bfloat16* xr = x + (size_t)warp * n;
    float sq = 0.0f;
    for (int k = lane; k < n; k += 32) {
        const float v = __bfloat162float(xr[k]);
        sq += v * v;
    }
    for (int off = 16; off > 0; off /= 2) sq += __shfl_down_sync(0xffffffff, sq, off);
    if (lane == 0) y[warp] = sqrtf(sq / n);
}

extern "C" void launch(const __nv_bfloat16* x, float* y, int m, int n, cudaStream_t stream) {
    const int block = 128;
    rms_rows<<<(m * 32 + block - 1) / block, block, 0, stream>>>(x, y, m, n);
}
