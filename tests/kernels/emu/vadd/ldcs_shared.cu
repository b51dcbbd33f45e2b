#include <cuda_runtime.h>
// Stages a tile of `a` in shared memory, then reads it back with the streaming load __ldcs, which is
// ld.global.cs: a shared address faults on a GPU.
__global__ void vadd(const float* __restrict__ a, const float* __restrict__ b, float* __restrict__ c, int n) {
  __shared__ float tile[256];
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  tile[threadIdx.x] = i < n ? a[i] : 0.f;
  __syncthreads();
  if (i < n) c[i] = __ldcs(&tile[threadIdx.x]) + b[i];
}
extern "C" void launch(const float* a, const float* b, float* c, int N, cudaStream_t stream) {
  vadd<<<(N + 255) / 256, 256, 0, stream>>>(a, b, c, N);
}
