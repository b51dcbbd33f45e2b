// ADVERSARIAL: remembers the input pointer and skips the work the second time.
// Same x and y as last call: return at once (the output is "still there"). Same x, new y: copy
// the cached output. A timer that reuses buffers without refilling them would reward this.
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

// Block-wide reduction through shared memory; every thread gets the result.
template <bool IsMax>
__device__ __forceinline__ float block_reduce(float v, float* scratch) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  v = IsMax ? warp_max(v) : warp_sum(v);
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  float r = lane < (blockDim.x >> 5) ? scratch[lane] : (IsMax ? -INFINITY : 0.f);
  r = IsMax ? warp_max(r) : warp_sum(r);
  __syncthreads();  // scratch is reused by the next reduction
  return r;
}

// One block per row: max, sum of exponentials, normalized write.
__global__ void __launch_bounds__(kThreads) softmax_rows(const float* __restrict__ x, float* __restrict__ y,
                                                         int M, int N) {
  __shared__ float scratch[32];
  const int row = blockIdx.x;
  if (row >= M) return;
  const float* xr = x + static_cast<size_t>(row) * N;
  float* yr = y + static_cast<size_t>(row) * N;
  float m = -INFINITY;
  for (int i = threadIdx.x; i < N; i += blockDim.x) m = fmaxf(m, xr[i]);
  m = block_reduce<true>(m, scratch);
  float s = 0.f;
  for (int i = threadIdx.x; i < N; i += blockDim.x) s += expf(xr[i] - m);
  s = block_reduce<false>(s, scratch);
  const float inv = 1.f / s;
  for (int i = threadIdx.x; i < N; i += blockDim.x) yr[i] = expf(xr[i] - m) * inv;
}

static const float* g_last_x = nullptr;
static float* g_last_y = nullptr;
static int g_last_m = -1, g_last_n = -1;

extern "C" void launch(const float* x, float* y, int M, int N, cudaStream_t stream) {
  if (x == g_last_x && M == g_last_m && N == g_last_n) {
    if (y != g_last_y)
      cudaMemcpyAsync(y, g_last_y, sizeof(float) * static_cast<size_t>(M) * N, cudaMemcpyDeviceToDevice, stream);
    g_last_y = y;
    return;
  }
  softmax_rows<<<M, kThreads, 0, stream>>>(x, y, M, N);
  g_last_x = x;
  g_last_y = y;
  g_last_m = M;
  g_last_n = N;
}
