#include <cuda_runtime.h>
// Reads the SM id with inline PTX: the emulator has no SMs to name and must say so.
__global__ void vadd(const float* a, const float* b, float* c, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  unsigned sm;
  asm volatile("mov.u32 %0, %%smid;" : "=r"(sm));
  if (i < n) c[i] = a[i] + b[i] + 0.f * sm;
}
extern "C" void launch(const float* a, const float* b, float* c, int N, cudaStream_t stream) {
  vadd<<<(N + 255) / 256, 256, 0, stream>>>(a, b, c, N);
}
