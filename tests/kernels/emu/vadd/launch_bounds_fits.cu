// A bound equal to the block launched (a constant of the file, a template parameter): accepted.
#include <cuda_runtime.h>
constexpr int kBlock = 256;
template <int BLOCK>
__global__ void __launch_bounds__(BLOCK) vadd(const float* __restrict__ a, const float* __restrict__ b,
                                              float* __restrict__ c, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) c[i] = a[i] + b[i];
}
__global__ void __launch_bounds__(kBlock * 2) vadd2(const float* a, float* c, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) c[i] += 0.0f * a[i];
}
extern "C" void launch(const float* a, const float* b, float* c, int N, cudaStream_t stream) {
  vadd<kBlock><<<(N + kBlock - 1) / kBlock, kBlock, 0, stream>>>(a, b, c, N);
  vadd2<<<(N + kBlock - 1) / kBlock, kBlock, 0, stream>>>(a, c, N);
}
