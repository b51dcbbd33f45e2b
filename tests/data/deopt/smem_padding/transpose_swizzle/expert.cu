// y = x^T through a 32 x 32 shared tile: coalesced row reads, coalesced row writes, and an XOR-swizzled column index
// so the column read of the tile hits 32 different banks. Block 32 x 8, 4 rows per thread.
#include <cuda_runtime.h>

#define TILE 32
#define ROWS 8

__global__ void __launch_bounds__(256) transpose_pad(const float* __restrict__ x, float* __restrict__ y, int M, int N) {
    __shared__ float tile[TILE][TILE];
    const int tx = threadIdx.x, ty = threadIdx.y;
    const int col0 = blockIdx.x * TILE, row0 = blockIdx.y * TILE;
    for (int k = 0; k < TILE; k += ROWS) {
        const int r = row0 + ty + k, c = col0 + tx;
        if (r < M && c < N) tile[ty + k][tx ^ ((ty + k) % TILE)] = x[(size_t)r * N + c];
    }
    __syncthreads();
    for (int k = 0; k < TILE; k += ROWS) {
        const int yr = col0 + ty + k, yc = row0 + tx;
        if (yr < N && yc < M) y[(size_t)yr * M + yc] = tile[tx][(ty + k) ^ (tx % TILE)];
    }
}

extern "C" void launch(const float* x, float* y, int M, int N, cudaStream_t stream) {
    const dim3 grid((N + TILE - 1) / TILE, (M + TILE - 1) / TILE);
    transpose_pad<<<grid, dim3(TILE, ROWS), 0, stream>>>(x, y, M, N);
}
