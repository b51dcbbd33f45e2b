#include <cuda_runtime.h>
// Block-private histograms in shared memory, merged with global atomics.
__global__ void zero(int* h) { h[threadIdx.x] = 0; }
__global__ void hist(const int* __restrict__ v, int* __restrict__ h, int n) {
  __shared__ unsigned int local[128];
  for (int b = threadIdx.x; b < 128; b += blockDim.x) local[b] = 0;
  __syncthreads();
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
    atomicInc(&local[v[i] + 64], 0xffffffffu);
  __syncthreads();
  for (int b = threadIdx.x; b < 128; b += blockDim.x)
    if (local[b]) atomicAdd(&h[b], (int)local[b]);
}
extern "C" void launch(const int* v, int* h, int N, cudaStream_t stream) {
  zero<<<1, 128, 0, stream>>>(h);
  hist<<<4, 96, 0, stream>>>(v, h, N);
}
