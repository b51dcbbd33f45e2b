#include <cuda_runtime.h>
// Waits for a flag that nothing ever sets.
__device__ volatile int ready_flag = 0;
__global__ void vadd(const float* a, const float* b, float* c, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  while (ready_flag == 0) {
  }
  if (i < n) c[i] = a[i] + b[i];
}
extern "C" void launch(const float* a, const float* b, float* c, int N, cudaStream_t stream) {
  vadd<<<(N + 255) / 256, 256, 0, stream>>>(a, b, c, N);
}
