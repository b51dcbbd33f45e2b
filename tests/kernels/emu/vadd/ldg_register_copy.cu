#include <cuda_runtime.h>
// Four elements per thread, copied into a register array, then read back with __ldg: a read-only
// global load of a local address, which a GPU refuses ("operation not supported on global/shared
// address space"). The sums are right, so only the address space gives it away.
__global__ void vadd(const float* __restrict__ a, const float* __restrict__ b, float* __restrict__ c, int n) {
  int base = 4 * (blockIdx.x * blockDim.x + threadIdx.x);
  float lane[4];
  for (int k = 0; k < 4; ++k) lane[k] = base + k < n ? a[base + k] : 0.f;
  for (int k = 0; k < 4; ++k)
    if (base + k < n) c[base + k] = __ldg(&lane[k]) + __ldg(b + base + k);
}
extern "C" void launch(const float* a, const float* b, float* c, int N, cudaStream_t stream) {
  vadd<<<(N + 1023) / 1024, 256, 0, stream>>>(a, b, c, N);
}
