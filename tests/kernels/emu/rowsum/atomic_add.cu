#include <cuda_runtime.h>
// Per-warp shuffle sums combined with one float atomicAdd per warp into a zeroed output: the
// float sum order varies between schedules, so only a workload that tolerates it passes.
__global__ void zero(float* y, int m) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < m) y[i] = 0.f;
}
__global__ void rowsum(const float* x, float* y, int n) {
  const float* row = x + (size_t)blockIdx.x * n;
  float v = 0.f;
  for (int i = threadIdx.x; i < n; i += blockDim.x) v += row[i];
  for (int o = 16; o > 0; o >>= 1) v += __shfl_down_sync(0xffffffff, v, o);
  if (threadIdx.x % warpSize == 0) atomicAdd(&y[blockIdx.x], v);
}
extern "C" void launch(const float* x, float* y, int M, int N, cudaStream_t stream) {
  zero<<<(M + 127) / 128, 128, 0, stream>>>(y, M);
  rowsum<<<M, 256, 0, stream>>>(x, y, N);
}
