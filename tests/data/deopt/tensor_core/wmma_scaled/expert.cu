// C = alpha * A B on tensor cores: four warps, one 16 x 16 accumulator fragment each (block tile
// 32 x 32), K in steps of 16 staged element by element with zero fill, fragments written to one
// block-wide float tile and scaled on the way out.
#include <cuda_runtime.h>
#include <cuda_fp16.h>
#include <mma.h>
using namespace nvcuda;

#define TILE 32
#define KS 16

__global__ void hgemm_tc(const half* A, const half* B, half* C, float alpha, int M, int N, int K) {
    __shared__ __align__(32) half sA[TILE][KS + 8];
    __shared__ __align__(32) half sB[KS][TILE + 8];
    __shared__ __align__(32) float sC[TILE][TILE + 8];
    int wy = (threadIdx.x / 32) / 2, wx = (threadIdx.x / 32) % 2;
    wmma::fragment<wmma::accumulator, 16, 16, 16, float> c;
    wmma::fill_fragment(c, 0.0f);
    for (int t = 0; t < (K + KS - 1) / KS; t++) {
        for (int i = threadIdx.x; i < TILE * KS; i += blockDim.x) {
            int r = i / KS, kk = i % KS;
            int gr = blockIdx.y * TILE + r, gk = t * KS + kk;
            sA[r][kk] = (gr < M && gk < K) ? A[gr * K + gk] : __float2half(0.0f);
        }
        for (int i = threadIdx.x; i < KS * TILE; i += blockDim.x) {
            int kk = i / TILE, cc = i % TILE;
            int gk = t * KS + kk, gc = blockIdx.x * TILE + cc;
            sB[kk][cc] = (gk < K && gc < N) ? B[gk * N + gc] : __float2half(0.0f);
        }
        __syncthreads();
        wmma::fragment<wmma::matrix_a, 16, 16, 16, half, wmma::row_major> a;
        wmma::fragment<wmma::matrix_b, 16, 16, 16, half, wmma::row_major> b;
        wmma::load_matrix_sync(a, &sA[wy * 16][0], KS + 8);
        wmma::load_matrix_sync(b, &sB[0][wx * 16], TILE + 8);
        wmma::mma_sync(c, a, b, c);
        __syncthreads();
    }
    wmma::store_matrix_sync(&sC[wy * 16][wx * 16], c, TILE + 8, wmma::mem_row_major);
    __syncthreads();
    for (int i = threadIdx.x; i < TILE * TILE; i += blockDim.x) {
        int r = i / TILE, cc = i % TILE;
        int gr = blockIdx.y * TILE + r, gc = blockIdx.x * TILE + cc;
        if (gr < M && gc < N) C[gr * N + gc] = __float2half(alpha * sC[r][cc]);
    }
}

extern "C" void launch(const half* A, const half* B, half* C, float alpha, int M, int N, int K, cudaStream_t s) {
    hgemm_tc<<<dim3((N + TILE - 1) / TILE, (M + TILE - 1) / TILE), 128, 0, s>>>(A, B, C, alpha, M, N, K);
}
