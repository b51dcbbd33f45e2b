// The bound is a template parameter: BLOCK = 64 on the kernel, 256 threads at the launch.
#include <cuda_runtime.h>
template <int BLOCK>
__global__ void __launch_bounds__(BLOCK, 2) vadd(const float* __restrict__ a, const float* __restrict__ b,
                                                 float* __restrict__ c, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) c[i] = a[i] + b[i];
}
extern "C" void launch(const float* a, const float* b, float* c, int N, cudaStream_t stream) {
  vadd<64><<<(N + 255) / 256, 256, 0, stream>>>(a, b, c, N);
}
