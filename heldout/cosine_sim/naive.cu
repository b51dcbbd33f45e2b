// cosine_sim, naive: one thread per row; dot product and both squared norms in one loop.
#include <cuda_runtime.h>
#include <math.h>

__global__ void cosine_rows_naive(const float* a, const float* b, float* y, int M, int N, float eps) {
    int row = blockIdx.x * blockDim.x + threadIdx.x;
    if (row >= M) return;
    size_t base = (size_t)row * N;
    float ab = 0.0f, aa = 0.0f, bb = 0.0f;
    for (int j = 0; j < N; ++j) {
        float u = a[base + j];
        float v = b[base + j];
        ab += u * v;
        aa += u * u;
        bb += v * v;
    }
    y[row] = ab / fmaxf(sqrtf(aa) * sqrtf(bb), eps);
}

extern "C" void launch(const float* a, const float* b, float* y, int M, int N, float eps, cudaStream_t stream) {
    const int threads = 128;
    cosine_rows_naive<<<(M + threads - 1) / threads, threads, 0, stream>>>(a, b, y, M, N, eps);
}
