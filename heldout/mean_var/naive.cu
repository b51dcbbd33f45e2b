// mean_var, naive: one thread per row; a sum pass, then a squared-deviation pass.
#include <cuda_runtime.h>

__global__ void row_mean_var_naive(const float* x, float* mean, float* var, int M, int N) {
    int row = blockIdx.x * blockDim.x + threadIdx.x;
    if (row >= M) return;
    const float* r = x + (size_t)row * N;
    float s = 0.0f;
    for (int j = 0; j < N; ++j) s += r[j];
    float mu = s / N;
    float q = 0.0f;
    for (int j = 0; j < N; ++j) {
        float d = r[j] - mu;
        q += d * d;
    }
    mean[row] = mu;
    var[row] = q / N;
}

extern "C" void launch(const float* x, float* mean, float* var, int M, int N, cudaStream_t stream) {
    const int threads = 128;
    row_mean_var_naive<<<(M + threads - 1) / threads, threads, 0, stream>>>(x, mean, var, M, N);
}
