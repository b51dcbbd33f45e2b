#include <cuda_runtime.h>
#include <cuda_fp16.h>
// One thread walks the row accumulating in half precision: every step rounds to 11 bits.
__global__ void rowsum(const __half* x, __half* y, int n) {
  __half acc = __float2half(0.f);
  const __half* row = x + (size_t)blockIdx.x * n;
  for (int i = 0; i < n; ++i) acc = __hadd(acc, row[i]);
  y[blockIdx.x] = acc;
}
extern "C" void launch(const __half* x, __half* y, int M, int N, cudaStream_t stream) {
  rowsum<<<M, 1, 0, stream>>>(x, y, N);
}
