// C = A B, row-major, read through accessor lambdas declared in the kernel (one capturing by
// reference, one by value with a trailing return type); the accumulator is updated as
// `acc = acc + x * y`.
#include <cuda_runtime.h>

__global__ void mm_lambda(const float* A, const float* B, float* C, int M, int N, int K) {
    const int row = blockIdx.y * blockDim.y + threadIdx.y;
    const int col = blockIdx.x * blockDim.x + threadIdx.x;
    auto a_at = [&](int i, int kk) { return A[i * K + kk]; };
    auto b_at = [=](int kk, int j) -> float { return B[(size_t)kk * N + j]; };
    if (row >= M || col >= N) return;
    float acc = 0.0f;
    for (int k = 0; k < K; ++k) acc = acc + a_at(row, k) * b_at(k, col);
    C[row * N + col] = acc;
}

extern "C" void launch(const float* A, const float* B, float* C, int M, int N, int K, cudaStream_t stream) {
    mm_lambda<<<dim3((N + 15) / 16, (M + 15) / 16), dim3(16, 16), 0, stream>>>(A, B, C, M, N, K);
}
