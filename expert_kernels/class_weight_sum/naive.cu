// class_weight_sum, naive: one thread per label, one global atomic add of its weight.
#include <cuda_runtime.h>

#define NUM_CLASSES 1000

__global__ void class_weight_sum_naive(const int* labels, const float* weights, float* out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        int c = labels[i];
        atomicAdd(&out[c], weights[i]);
    }
}

extern "C" void launch(const int* labels, const float* weights, float* out, int N, cudaStream_t stream) {
    cudaMemsetAsync(out, 0, NUM_CLASSES * sizeof(float), stream);
    const int threads = 256;
    class_weight_sum_naive<<<(N + threads - 1) / threads, threads, 0, stream>>>(labels, weights, out, N);
}
