// y[r] = sum_j x[r, j] + max_j x[r, j], one warp per row: cooperative-groups tile reductions.
#include <cuda_runtime.h>
#include <math.h>
#include <cooperative_groups.h>
#include <cooperative_groups/reduce.h>

namespace cg = cooperative_groups;

constexpr int kRowsPerBlock = 4;

__global__ void row_sum_max(const float* __restrict__ x, float* __restrict__ y, int M, int N) {
    cg::thread_block block = cg::this_thread_block();
    cg::thread_block_tile<32> warp = cg::tiled_partition<32>(block);
    const int row = blockIdx.x * kRowsPerBlock + threadIdx.x / 32;
    if (row >= M) return;  // whole warps leave
    const float* xr = x + (size_t)row * N;
    float s = 0.f, m = -INFINITY;
    for (int j = warp.thread_rank(); j < N; j += warp.size()) {
        s += xr[j];
        m = fmaxf(m, xr[j]);
    }
    s = cg::reduce(warp, s, cg::plus<float>());
    for (int off = warp.size() / 2; off > 0; off /= 2) m = fmaxf(m, warp.shfl_down(m, off));
    if (warp.thread_rank() == 0) y[row] = s + m;
}

extern "C" void launch(const float* x, float* y, int M, int N, cudaStream_t stream) {
    row_sum_max<<<(M + kRowsPerBlock - 1) / kRowsPerBlock, kRowsPerBlock * 32, 0, stream>>>(x, y, M, N);
}
