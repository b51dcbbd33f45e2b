#include <cuda_runtime.h>
// A size dispatch: two instantiations compiled, the small shapes launch only vadd_t<128>.
template <int B>
__global__ void __launch_bounds__(B) vadd_t(const float* __restrict__ a, const float* __restrict__ b,
                                             float* __restrict__ c, int n) {
  __shared__ float stage[B * 8];
  int i = blockIdx.x * B + threadIdx.x;
  stage[threadIdx.x * 8] = i < n ? a[i] : 0.0f;
  __syncthreads();
  if (i < n) c[i] = stage[threadIdx.x * 8] + b[i];
}
extern "C" void launch(const float* a, const float* b, float* c, int N, cudaStream_t stream) {
  if (N > (1 << 24)) {
    vadd_t<1024><<<(N + 1023) / 1024, 1024, 0, stream>>>(a, b, c, N);
  } else {
    vadd_t<128><<<(N + 127) / 128, 128, 0, stream>>>(a, b, c, N);
  }
}
