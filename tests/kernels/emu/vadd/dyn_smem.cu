#include <cuda_runtime.h>
// Stages both inputs through dynamic shared memory (two arrays carved from one buffer).
__global__ void vadd(const float* a, const float* b, float* c, int n) {
  extern __shared__ float4 smem_raw[];
  float* sa = reinterpret_cast<float*>(smem_raw);
  float* sb = sa + blockDim.x;
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) { sa[threadIdx.x] = a[i]; sb[threadIdx.x] = b[i]; }
  __syncthreads();
  // read the neighbour's slots to make the barrier matter
  int j = (threadIdx.x + 1) % blockDim.x;
  int k = blockIdx.x * blockDim.x + j;
  __syncthreads();
  if (k < n) c[k] = sa[j] + sb[j];
}
extern "C" void launch(const float* a, const float* b, float* c, int N, cudaStream_t stream) {
  const int block = 128;
  vadd<<<(N + block - 1) / block, block, 2 * block * sizeof(float), stream>>>(a, b, c, N);
}
