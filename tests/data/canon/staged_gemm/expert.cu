// C = A @ B (row-major fp32): a square shared-memory tiled GEMM whose tile copies go through one
// templated device helper, called once per operand per K step.
#include <cuda_runtime.h>

// Copies the ROWS x COLS tile at (r0, c0) of a row-major `src` with leading dimension `ld` into
// `dst`, zero outside [0, rows) x [0, cols); all TILE * TILE threads of the block take part.
template <typename Elem, int TILE, int ROWS = TILE, int COLS = TILE>
__device__ __forceinline__ void stage_tile(const Elem* src, int ld, Elem dst[ROWS][COLS], int r0, int c0,
                                           int rows, int cols) {
    const int t = threadIdx.y * TILE + threadIdx.x;
    for (int e = t; e < ROWS * COLS; e += TILE * TILE) {
        const int r = e / COLS, c = e % COLS;
        dst[r][c] = (r0 + r < rows && c0 + c < cols) ? src[(r0 + r) * ld + c0 + c] : Elem(0);
    }
}

constexpr int kTile = 16;

__global__ void staged_gemm(const float* __restrict__ A, const float* __restrict__ B, float* __restrict__ C,
                            int M, int N, int K) {
    __shared__ float a_tile[kTile][kTile];
    __shared__ float b_tile[kTile][kTile];
    const int row = blockIdx.y * kTile + threadIdx.y;
    const int col = blockIdx.x * kTile + threadIdx.x;
    float acc = 0.0f;
    for (int k0 = 0; k0 < K; k0 += kTile) {
        stage_tile<float, kTile>(A, K, a_tile, blockIdx.y * kTile, k0, M, K);
        stage_tile<float, kTile>(B, N, b_tile, k0, blockIdx.x * kTile, K, N);
        __syncthreads();
        for (int kk = 0; kk < kTile; ++kk) acc += a_tile[threadIdx.y][kk] * b_tile[kk][threadIdx.x];
        __syncthreads();
    }
    if (row < M && col < N) C[row * N + col] = acc;
}

extern "C" void launch(const float* A, const float* B, float* C, int M, int N, int K, cudaStream_t stream) {
    dim3 block(kTile, kTile);
    dim3 grid((N + kTile - 1) / kTile, (M + kTile - 1) / kTile);
    staged_gemm<<<grid, block, 0, stream>>>(A, B, C, M, N, K);
}
