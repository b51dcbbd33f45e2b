// dot, naive: one thread (the one output) walks both vectors.
#include <cuda_runtime.h>

__global__ void dot_naive(const float* x, const float* y, float* out, int n) {
    double acc = 0.0;
    for (int i = 0; i < n; ++i) acc += (double)x[i] * (double)y[i];
    out[0] = (float)acc;
}

extern "C" void launch(const float* x, const float* y, float* out, double* partials, int N,
                       cudaStream_t stream) {
    (void)partials;
    dot_naive<<<1, 1, 0, stream>>>(x, y, out, N);
}
