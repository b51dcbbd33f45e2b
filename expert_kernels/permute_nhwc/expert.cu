// permute_nhwc, expert: NCHW -> NHWC for fp32, every image a (C, P = H*W) matrix transposed.
//
// A block stages a 32 x 32 tile of one image in shared memory: it reads 32 channels x 32 pixels
// with coalesced reads along the pixels, then writes 32 pixels x 32 channels with coalesced
// writes along the channels. The tile has 33 columns so that the transposed reads hit 32
// different banks. Each thread moves 32 / ROWS elements each way (several loads in flight).
// Tiles inside the image skip the bounds checks (template on FULL); blockIdx.z picks the image.
#include <cuda_runtime.h>

namespace {

constexpr int kTile = 32;  // tile edge (elements)
constexpr int kRows = 8;   // block = kTile x kRows threads

template <int TILE, int ROWS, bool FULL>
__global__ void __launch_bounds__(TILE * ROWS)
nchw_to_nhwc(const float* __restrict__ x, float* __restrict__ y, int C, int P) {
    __shared__ float tile[TILE][TILE + 1];  // +1 column: conflict-free transposed reads
    const size_t image = static_cast<size_t>(C) * P;
    const float* __restrict__ xb = x + blockIdx.z * image;
    float* __restrict__ yb = y + blockIdx.z * image;
    const int p0 = blockIdx.x * TILE;  // first pixel of the tile
    const int c0 = blockIdx.y * TILE;  // first channel of the tile

    const int p = p0 + threadIdx.x;
#pragma unroll
    for (int k = 0; k < TILE; k += ROWS) {
        const int c = c0 + threadIdx.y + k;
        if (FULL || (c < C && p < P)) tile[threadIdx.y + k][threadIdx.x] = __ldg(&xb[static_cast<size_t>(c) * P + p]);
    }
    __syncthreads();
    const int c = c0 + threadIdx.x;
#pragma unroll
    for (int k = 0; k < TILE; k += ROWS) {
        const int q = p0 + threadIdx.y + k;  // pixel written by this row of the block
        if (FULL || (q < P && c < C)) yb[static_cast<size_t>(q) * C + c] = tile[threadIdx.x][threadIdx.y + k];
    }
}

}  // namespace

extern "C" void launch(const float* x, float* y, int B, int C, int H, int W, cudaStream_t stream) {
    const int P = H * W;
    const dim3 block(kTile, kRows);
    const dim3 grid((P + kTile - 1) / kTile, (C + kTile - 1) / kTile, B);
    if (P % kTile == 0 && C % kTile == 0)
        nchw_to_nhwc<kTile, kRows, true><<<grid, block, 0, stream>>>(x, y, C, P);
    else
        nchw_to_nhwc<kTile, kRows, false><<<grid, block, 0, stream>>>(x, y, C, P);
}
