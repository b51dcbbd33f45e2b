// histogram, naive: one thread per input byte, a global atomic increment per element.
#include <cuda_runtime.h>
#include <stdint.h>

__global__ void histogram_clear(int* counts) {
    if (threadIdx.x < 256) counts[threadIdx.x] = 0;
}

__global__ void histogram_naive(const uint8_t* x, int* counts, int N) {
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < (size_t)N) atomicAdd(&counts[x[i]], 1);
}

extern "C" void launch(const uint8_t* x, int* counts, int N, cudaStream_t stream) {
    const int threads = 256;
    histogram_clear<<<1, 256, 0, stream>>>(counts);
    histogram_naive<<<(unsigned)(((size_t)N + threads - 1) / threads), threads, 0, stream>>>(x, counts, N);
}
