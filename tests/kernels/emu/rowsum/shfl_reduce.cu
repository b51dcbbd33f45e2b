#include <cuda_runtime.h>

__device__ float warp_sum(float v) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_down_sync(0xffffffff, v, o);
  return v;
}

template <int BLOCK>
__global__ void rowsum(const float* __restrict__ x, float* __restrict__ y, int n) {
  __shared__ float partial[BLOCK / 32];
  const float* row = x + (size_t)blockIdx.x * n;
  float s = 0.f;
  for (int i = threadIdx.x; i < n; i += BLOCK) s += row[i];
  s = warp_sum(s);
  if (threadIdx.x % 32 == 0) partial[threadIdx.x / 32] = s;
  __syncthreads();
  if (threadIdx.x < 32) {
    float v = threadIdx.x < BLOCK / 32 ? partial[threadIdx.x] : 0.f;
    v = warp_sum(v);
    if (threadIdx.x == 0) y[blockIdx.x] = v;
  }
}

extern "C" void launch(const float* x, float* y, int M, int N, cudaStream_t stream) {
  rowsum<256><<<M, 256, 0, stream>>>(x, y, N);
}
