#include <cuda_runtime.h>
#include <cuda_bf16.h>
template <typename T2>
__device__ __forceinline__ T2 affine(T2 v) {
  float2 f = __bfloat1622float2(v);
  return __floats2bfloat162_rn(fmaf(f.x, 2.f, 1.f), __fmaf_rn(__low2float(__halves2bfloat162(v.y, v.x)), 2.f, 1.f));
}
__global__ void __launch_bounds__(128) scale(const __nv_bfloat162* __restrict__ x, __nv_bfloat162* __restrict__ y, int pairs) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < pairs) y[i] = affine<__nv_bfloat162>(x[i]);
}
extern "C" void launch(const __nv_bfloat16* x, __nv_bfloat16* y, int N, cudaStream_t stream) {
  int pairs = N / 2;
  scale<<<(pairs + 127) / 128, 128, 0, stream>>>(reinterpret_cast<const __nv_bfloat162*>(x),
                                                  reinterpret_cast<__nv_bfloat162*>(y), pairs);
}
