// Declares a bound of 128 threads per block and launches 256: a GPU refuses the launch
// (cudaErrorInvalidValue), so the output is never written there; the emulator must refuse it too.
#include <cuda_runtime.h>
__global__ void __launch_bounds__(128) vadd(const float* __restrict__ a, const float* __restrict__ b,
                                            float* __restrict__ c, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) c[i] = a[i] + b[i];
}
extern "C" void launch(const float* a, const float* b, float* c, int N, cudaStream_t stream) {
  vadd<<<(N + 255) / 256, 256, 0, stream>>>(a, b, c, N);
}
