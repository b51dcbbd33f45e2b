#include <cuda_runtime.h>
#include <cooperative_groups.h>
#include <cooperative_groups/reduce.h>
namespace cg = cooperative_groups;

// Block of 128: tiles of 32 reduce with cg::reduce, tile leaders combine through shared memory.
__global__ void rowsum(const float* __restrict__ x, float* __restrict__ y, int n) {
  cg::thread_block block = cg::this_thread_block();
  cg::thread_block_tile<32> tile = cg::tiled_partition<32>(block);
  __shared__ float partial[4];
  const float* row = x + (size_t)blockIdx.x * n;
  float v = 0.f;
  for (int i = block.thread_rank(); i < n; i += block.size()) v += row[i];
  v = cg::reduce(tile, v, cg::plus<float>());
  if (tile.thread_rank() == 0) partial[tile.meta_group_rank()] = v;
  block.sync();
  if (tile.meta_group_rank() == 0) {
    float p = tile.thread_rank() < 4 ? partial[tile.thread_rank()] : 0.f;
    cg::thread_block_tile<4> quad = cg::tiled_partition<4>(tile);
    for (int o = 2; o > 0; o >>= 1) p += quad.shfl_down(p, o);
    if (block.thread_rank() == 0) y[blockIdx.x] = p;
  }
}
extern "C" void launch(const float* x, float* y, int M, int N, cudaStream_t stream) {
  rowsum<<<M, 128, 0, stream>>>(x, y, N);
}
