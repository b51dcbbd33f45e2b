// ADVERSARIAL: the sum is reduced through shared memory with the barrier after the partial
// writes left out, so warps read partial sums that other warps may not have written yet (a race
// in shared memory; the result depends on warp timing).
#include <cuda_runtime.h>
#include <math.h>

constexpr int kThreads = 256;

__device__ __forceinline__ float warp_max(float v) {
  for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}

__device__ __forceinline__ float warp_sum(float v) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}


__global__ void __launch_bounds__(kThreads) softmax_rows_racy(const float* __restrict__ x, float* __restrict__ y,
                                                              int M, int N) {
  __shared__ float partial[32];
  __shared__ float total[2];
  const int row = blockIdx.x, lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = blockDim.x >> 5;
  if (row >= M) return;
  const float* xr = x + static_cast<size_t>(row) * N;
  float* yr = y + static_cast<size_t>(row) * N;
  float m = -INFINITY;
  for (int i = threadIdx.x; i < N; i += blockDim.x) m = fmaxf(m, xr[i]);
  m = warp_max(m);
  if (lane == 0) partial[warp] = m;
  __syncthreads();
  if (warp == 0) {
    float r = lane < warps ? partial[lane] : -INFINITY;
    r = warp_max(r);
    if (lane == 0) total[0] = r;
  }
  __syncthreads();
  m = total[0];
  float s = 0.f;
  for (int i = threadIdx.x; i < N; i += blockDim.x) s += expf(xr[i] - m);
  s = warp_sum(s);
  if (lane == 0) partial[warp] = s;
  // BUG: missing __syncthreads() here
  if (warp == 0) {
    float r = lane < warps ? partial[lane] : 0.f;
    r = warp_sum(r);
    if (lane == 0) total[1] = r;
  }
  __syncthreads();
  const float inv = 1.f / total[1];
  for (int i = threadIdx.x; i < N; i += blockDim.x) yr[i] = expf(xr[i] - m) * inv;
}

extern "C" void launch(const float* x, float* y, int M, int N, cudaStream_t stream) {
  softmax_rows_racy<<<M, kThreads, 0, stream>>>(x, y, M, N);
}
