#include <cuda_fp16.h>
#include <mma.h>

using namespace nvcuda;

// fp16 GEMM, fp16 accumulation: a block of 4 warps per 32 x 64 tile of C, each warp a 16 x 32 strip
// (two 16 x 16 fragments) loaded straight from global memory. The epilogue goes through shared
// memory: the fragments fill a 32 x 64 image of the tile, then the block writes the image out in
// 8-byte pieces, a row of 64 by 16 threads. Written for the epilogue_staging tests.
constexpr int TILE_M = 32;
constexpr int TILE_N = 64;

__global__ void hgemm_staged(const half* A, const half* B, half* C, int M, int N, int K) {
    __shared__ half image[TILE_M][TILE_N];
    const int warp = threadIdx.x / 32;
    const int row0 = blockIdx.y * TILE_M + (warp / 2) * 16;
    const int col0 = blockIdx.x * TILE_N + (warp % 2) * 32;
    wmma::fragment<wmma::accumulator, 16, 16, 16, half> acc[2];
    wmma::fill_fragment(acc[0], 0.0f);
    wmma::fill_fragment(acc[1], 0.0f);
    for (int k = 0; k < K; k += 16) {
        wmma::fragment<wmma::matrix_a, 16, 16, 16, half, wmma::row_major> a;
        wmma::load_matrix_sync(a, A + row0 * K + k, K);
        for (int j = 0; j < 2; ++j) {
            wmma::fragment<wmma::matrix_b, 16, 16, 16, half, wmma::row_major> b;
            wmma::load_matrix_sync(b, B + k * N + col0 + j * 16, N);
            wmma::mma_sync(acc[j], a, b, acc[j]);
        }
    }
    half* image_warp = &image[0][0] + (warp / 2) * 16 * TILE_N + (warp % 2) * 32;
    half* c_block = &C[blockIdx.y * TILE_M * N + blockIdx.x * TILE_N];
    for (int j = 0; j < 2; ++j) {
        wmma::store_matrix_sync(image_warp + j * 16, acc[j], TILE_N, wmma::mem_row_major);
    }
    __syncthreads();
    for (int i = 0; i < 4; ++i) {
        *((int2*)(c_block + (i * 8 + threadIdx.x / 16) * N) + threadIdx.x % 16) =
            *((int2*)(&image[0][0] + (i * 8 + threadIdx.x / 16) * TILE_N) + threadIdx.x % 16);
    }
}

extern "C" void launch(const half* A, const half* B, half* C, int M, int N, int K, cudaStream_t stream) {
    dim3 grid(N / TILE_N, M / TILE_M);
    hgemm_staged<<<grid, 128, 0, stream>>>(A, B, C, M, N, K);
}
