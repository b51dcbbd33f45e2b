// Tiled transpose whose shared tile is one flat buffer: the padding is written as the row stride
// of the index (`j * (TILE + 1) + threadIdx.x`), not as a second dimension.
#include <cuda_runtime.h>

#define TILE 32
#define ROWS 8

__global__ void transpose_flat(const float* in, float* out, int M, int N) {
    __shared__ float buf[TILE * (TILE + 1)];
    int bx = blockIdx.x * TILE, by = blockIdx.y * TILE;
    int x = bx + threadIdx.x;
    for (int j = threadIdx.y; j < TILE; j += ROWS) {
        int y = by + j;
        if (x < N && y < M) buf[j * (TILE + 1) + threadIdx.x] = in[(size_t)y * N + x];
    }
    __syncthreads();
    int ox = by + threadIdx.x;
    for (int j = threadIdx.y; j < TILE; j += ROWS) {
        int oy = bx + j;
        if (ox < M && oy < N) out[(size_t)oy * M + ox] = buf[threadIdx.x * (TILE + 1) + j];
    }
}

extern "C" void launch(const float* x, float* y, int M, int N, cudaStream_t stream) {
    dim3 grid((N + TILE - 1) / TILE, (M + TILE - 1) / TILE);
    transpose_flat<<<grid, dim3(TILE, ROWS), 0, stream>>>(x, y, M, N);
}
