#include <cuda_runtime.h>
// The last warp finishes with the pre-Volta "warp-synchronous" idiom: no __syncwarp between steps.
__global__ void rowsum(const float* x, float* y, int n) {
  __shared__ float s[256];
  const float* row = x + (size_t)blockIdx.x * n;
  float v = 0.f;
  for (int i = threadIdx.x; i < n; i += 256) v += row[i];
  s[threadIdx.x] = v;
  __syncthreads();
  for (int stride = 128; stride > 32; stride >>= 1) {
    if (threadIdx.x < stride) s[threadIdx.x] += s[threadIdx.x + stride];
    __syncthreads();
  }
  if (threadIdx.x < 32) {
    volatile float* w = s;
    w[threadIdx.x] += w[threadIdx.x + 32];
    w[threadIdx.x] += w[threadIdx.x + 16];
    w[threadIdx.x] += w[threadIdx.x + 8];
    w[threadIdx.x] += w[threadIdx.x + 4];
    w[threadIdx.x] += w[threadIdx.x + 2];
    w[threadIdx.x] += w[threadIdx.x + 1];
  }
  if (threadIdx.x == 0) y[blockIdx.x] = s[0];
}
extern "C" void launch(const float* x, float* y, int M, int N, cudaStream_t stream) {
  rowsum<<<M, 256, 0, stream>>>(x, y, N);
}
