// linear_relu_bf16, expert: Y = relu(X W^T) on tensor cores through the WMMA API.
//
// - Block tile 128 x 128, K walked in 32-wide slices; eight warps of 64 x 32, each holding 4 x 2
//   m16n16k16 fp32 accumulator fragments (X as row-major matrix_a, W's N x K tile as col-major
//   matrix_b: the transposed operand needs no transpose, only the fragment layout).
// - Tiles staged with cp.async in 16-byte chunks (8 elements), double-buffered: the copy of slice
//   kt + 1 is in flight while the warps multiply slice kt. A chunk outside M, N or K is zero-filled
//   by the copy itself (src-size 0), so odd M and N need no second path (K is a multiple of 8).
// - Shared rows padded by 8 elements (80 bytes): fragment loads of consecutive rows hit different
//   banks, every fragment pointer stays 32-byte aligned and every leading dimension a multiple of 16
//   bytes.
// - Epilogue: each accumulator fragment goes through a per-warp 16 x 16 float scratch carved out of
//   the (then idle) A stage buffer; ReLU and the bf16 rounding run per element on the way to Y.
#include <cuda_runtime.h>
#include <cuda_bf16.h>
#include <mma.h>

using namespace nvcuda;

constexpr int BM = 128;  // block tile
constexpr int BN = 128;
constexpr int BK = 32;  // K slice
constexpr int PAD = 8;  // elements of padding per shared row
constexpr int LDS = BK + PAD;
constexpr int WARPS_M = 2;
constexpr int WARPS_N = 4;
constexpr int FM = 4;  // accumulator fragments per warp along M and N
constexpr int FN = 2;
constexpr int THREADS = 32 * WARPS_M * WARPS_N;
constexpr int CHUNKS = BK / 8;  // 16-byte chunks per tile row

__device__ __forceinline__ void cp_async16(void* smem, const void* gmem, bool full) {
    const unsigned dst = static_cast<unsigned>(__cvta_generic_to_shared(smem));
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(gmem), "r"(full ? 16 : 0));
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::); }
template <int N>
__device__ __forceinline__ void cp_async_wait() { asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory"); }

__global__ void __launch_bounds__(THREADS, 2)
linear_relu_bf16_wmma(const __nv_bfloat16* __restrict__ X, const __nv_bfloat16* __restrict__ W,
                      __nv_bfloat16* __restrict__ Y, int M, int N, int K) {
    __shared__ __align__(128) __nv_bfloat16 As[2][BM][LDS];
    __shared__ __align__(128) __nv_bfloat16 Bs[2][BN][LDS];
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    const int wm = (warp / WARPS_N) * (FM * 16), wn = (warp % WARPS_N) * (FN * 16);
    const int row0 = blockIdx.y * BM, col0 = blockIdx.x * BN;
    const int ktiles = (K + BK - 1) / BK;

    wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc[FM][FN];
#pragma unroll
    for (int i = 0; i < FM; ++i)
#pragma unroll
        for (int j = 0; j < FN; ++j) wmma::fill_fragment(acc[i][j], 0.0f);

    // slice 0 in flight before the loop
    for (int e = threadIdx.x; e < BM * CHUNKS; e += THREADS) {
        const int r = e / CHUNKS, c = (e % CHUNKS) * 8;
        const int row = row0 + r, k = c;
        const bool ok = row < M && k < K;
        cp_async16(&As[0][r][c], ok ? X + (size_t)row * K + k : X, ok);
    }
    for (int e = threadIdx.x; e < BN * CHUNKS; e += THREADS) {
        const int r = e / CHUNKS, c = (e % CHUNKS) * 8;
        const int col = col0 + r, k = c;
        const bool ok = col < N && k < K;
        cp_async16(&Bs[0][r][c], ok ? W + (size_t)col * K + k : W, ok);
    }
    cp_async_commit();

    for (int kt = 0; kt < ktiles; ++kt) {
        const int cur = kt & 1, nxt = cur ^ 1;
        if (kt + 1 < ktiles) {  // slice kt + 1 into the other buffer while slice kt is multiplied
            const int k0 = (kt + 1) * BK;
            for (int e = threadIdx.x; e < BM * CHUNKS; e += THREADS) {
                const int r = e / CHUNKS, c = (e % CHUNKS) * 8;
                const int row = row0 + r, k = k0 + c;
                const bool ok = row < M && k < K;
                cp_async16(&As[nxt][r][c], ok ? X + (size_t)row * K + k : X, ok);
            }
            for (int e = threadIdx.x; e < BN * CHUNKS; e += THREADS) {
                const int r = e / CHUNKS, c = (e % CHUNKS) * 8;
                const int col = col0 + r, k = k0 + c;
                const bool ok = col < N && k < K;
                cp_async16(&Bs[nxt][r][c], ok ? W + (size_t)col * K + k : W, ok);
            }
        }
        cp_async_commit();
        cp_async_wait<1>();  // this thread's copies of slice kt have landed
        __syncthreads();     // ... and everyone else's
#pragma unroll
        for (int kk = 0; kk < BK; kk += 16) {
            wmma::fragment<wmma::matrix_a, 16, 16, 16, __nv_bfloat16, wmma::row_major> a[FM];
            wmma::fragment<wmma::matrix_b, 16, 16, 16, __nv_bfloat16, wmma::col_major> b[FN];
#pragma unroll
            for (int i = 0; i < FM; ++i) wmma::load_matrix_sync(a[i], &As[cur][wm + i * 16][kk], LDS);
#pragma unroll
            for (int j = 0; j < FN; ++j) wmma::load_matrix_sync(b[j], &Bs[cur][wn + j * 16][kk], LDS);
#pragma unroll
            for (int i = 0; i < FM; ++i)
#pragma unroll
                for (int j = 0; j < FN; ++j) wmma::mma_sync(acc[i][j], a[i], b[j], acc[i][j]);
        }
        __syncthreads();  // slice kt's buffer is refilled by the next iteration
    }
    cp_async_wait<0>();
    __syncthreads();

    float* scratch = reinterpret_cast<float*>(&As[0][0][0]) + warp * 256;
#pragma unroll
    for (int i = 0; i < FM; ++i)
#pragma unroll
        for (int j = 0; j < FN; ++j) {
            wmma::store_matrix_sync(scratch, acc[i][j], 16, wmma::mem_row_major);
            __syncwarp();
            for (int e = lane; e < 256; e += 32) {
                const int row = row0 + wm + i * 16 + e / 16, col = col0 + wn + j * 16 + e % 16;
                if (row < M && col < N) Y[(size_t)row * N + col] = __float2bfloat16_rn(fmaxf(scratch[e], 0.0f));
            }
            __syncwarp();
        }
}

extern "C" void launch(const __nv_bfloat16* X, const __nv_bfloat16* W, __nv_bfloat16* Y, int M, int N, int K,
                       cudaStream_t stream) {
    dim3 grid((N + BN - 1) / BN, (M + BM - 1) / BM);
    linear_relu_bf16_wmma<<<grid, THREADS, 0, stream>>>(X, W, Y, M, N, K);
}
