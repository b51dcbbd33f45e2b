#include <cuda_runtime.h>
// Writes through a pointer offset far outside any allocation.
__global__ void vadd(const float* a, const float* b, float* c, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  float* bad = c + (1ll << 40);
  if (i < n) bad[i] = a[i] + b[i];
}
extern "C" void launch(const float* a, const float* b, float* c, int N, cudaStream_t stream) {
  vadd<<<(N + 255) / 256, 256, 0, stream>>>(a, b, c, N);
}
