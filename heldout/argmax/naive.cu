// argmax, naive: one thread per row, a strict-greater scan keeps the first maximum.
#include <cuda_runtime.h>

__global__ void argmax_rows_naive(const float* x, long long* idx, int M, int N) {
    int row = blockIdx.x * blockDim.x + threadIdx.x;
    if (row >= M) return;
    size_t base = (size_t)row * N;
    float best = x[base];
    int where = 0;
    for (int j = 1; j < N; ++j) {
        float v = x[base + j];
        if (v > best) {
            best = v;
            where = j;
        }
    }
    idx[row] = where;
}

extern "C" void launch(const float* x, long long* idx, int M, int N, cudaStream_t stream) {
    const int threads = 128;
    argmax_rows_naive<<<(M + threads - 1) / threads, threads, 0, stream>>>(x, idx, M, N);
}
