// class_weight_share, naive: one thread per label adds its weight into the global sums with an
// atomic; then one thread adds up the sums and divides each by the total.
#include <cuda_runtime.h>

#define NUM_CLASSES 1000

__global__ void class_weight_sum_naive(const int* labels, const float* weights, float* out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        int c = labels[i];
        atomicAdd(&out[c], weights[i]);
    }
}

__global__ void class_share_naive(float* out) {
    float total = 0.0f;
    for (int c = 0; c < NUM_CLASSES; ++c) total += out[c];
    for (int c = 0; c < NUM_CLASSES; ++c) out[c] = out[c] / total;
}

extern "C" void launch(const int* labels, const float* weights, float* out, int N, cudaStream_t stream) {
    cudaMemsetAsync(out, 0, NUM_CLASSES * sizeof(float), stream);
    const int threads = 256;
    class_weight_sum_naive<<<(N + threads - 1) / threads, threads, 0, stream>>>(labels, weights, out, N);
    class_share_naive<<<1, 1, 0, stream>>>(out);
}
