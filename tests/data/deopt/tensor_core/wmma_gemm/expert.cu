// C = A B for fp16 A (M x K, row-major) and B (K x N, row-major), fp32 C, on tensor cores: one warp
// per 16 x 16 tile of C, WMMA m16n16k16 fragments, fp32 accumulation. M, N, K multiples of 16.
#include <cuda_runtime.h>
#include <cuda_fp16.h>
#include <mma.h>

using namespace nvcuda;

constexpr int kWarpsPerBlock = 4;

__global__ void __launch_bounds__(128) wmma_gemm(const __half* __restrict__ A, const __half* __restrict__ B,
                                                 float* __restrict__ C, int M, int N, int K) {
    const int warp = (blockIdx.x * blockDim.x + threadIdx.x) / 32;
    const int tiles_n = N / 16;
    const int tm = warp / tiles_n, tn = warp % tiles_n;
    if (tm >= M / 16) return;  // whole warps leave together
    wmma::fragment<wmma::matrix_a, 16, 16, 16, __half, wmma::row_major> a;
    wmma::fragment<wmma::matrix_b, 16, 16, 16, __half, wmma::row_major> b;
    wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc;
    wmma::fill_fragment(acc, 0.0f);
    for (int k = 0; k < K; k += 16) {
        wmma::load_matrix_sync(a, A + (size_t)tm * 16 * K + k, K);
        wmma::load_matrix_sync(b, B + (size_t)k * N + tn * 16, N);
        wmma::mma_sync(acc, a, b, acc);
    }
    for (int e = 0; e < acc.num_elements; ++e) acc.x[e] = acc.x[e] * 0.5f;
    wmma::store_matrix_sync(C + (size_t)tm * 16 * N + tn * 16, acc, N, wmma::mem_row_major);
}

extern "C" void launch(const __half* A, const __half* B, float* C, int M, int N, int K, cudaStream_t stream) {
    const int warps = (M / 16) * (N / 16);
    wmma_gemm<<<(warps + kWarpsPerBlock - 1) / kWarpsPerBlock, 32 * kWarpsPerBlock, 0, stream>>>(A, B, C, M, N, K);
}
