// reduce_sum, naive: one thread (the one output) walks the whole vector.
#include <cuda_runtime.h>

__global__ void sum_naive(const float* x, float* out, int n) {
    double acc = 0.0;
    for (int i = 0; i < n; ++i) acc += x[i];
    out[0] = (float)acc;
}

extern "C" void launch(const float* x, float* out, double* partials, int N, cudaStream_t stream) {
    (void)partials;
    sum_naive<<<1, 1, 0, stream>>>(x, out, N);
}
