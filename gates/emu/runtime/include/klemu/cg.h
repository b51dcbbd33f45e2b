// cooperative_groups: thread_block, thread_block_tile<N> (N <= 32) and cg::reduce / scans.
// Tiles are consecutive lanes of one warp; their collectives are warp rendezvous on the tile mask.
#pragma once
#include "core.h"

namespace cooperative_groups {

class thread_block {
 public:
  void sync(int line = __builtin_LINE()) const { ::klemu::barrier(0, 0, line, "thread_block::sync"); }
  unsigned thread_rank() const { return ::klemu::g_cur->linear; }
  unsigned size() const { return blockDim.x * blockDim.y * blockDim.z; }
  unsigned num_threads() const { return size(); }
  dim3 group_index() const { return dim3(blockIdx.x, blockIdx.y, blockIdx.z); }
  dim3 thread_index() const { return dim3(threadIdx.x, threadIdx.y, threadIdx.z); }
  dim3 group_dim() const { return blockDim; }
  dim3 dim_threads() const { return blockDim; }
};
static inline thread_block this_thread_block() { return thread_block(); }
typedef thread_block thread_group;

template <unsigned N, class Parent = void>
class thread_block_tile {
  static_assert(N >= 1 && N <= 32 && (N & (N - 1)) == 0, "tiles of 1..32 threads, a power of two");

 public:
  thread_block_tile() = default;
  template <unsigned M, class P>
  thread_block_tile(const thread_block_tile<M, P>&) {}
  unsigned mask() const {
    unsigned l = ::klemu::g_cur->lane;
    return N == 32 ? 0xffffffffu : (((1u << N) - 1u) << (l / N * N));
  }
  void sync(int line = __builtin_LINE()) const { __syncwarp(mask(), line); }
  unsigned thread_rank() const { return ::klemu::g_cur->linear % N; }
  static constexpr unsigned size() { return N; }
  static constexpr unsigned num_threads() { return N; }
  unsigned meta_group_rank() const { return ::klemu::g_cur->linear / N; }
  unsigned meta_group_size() const { return (blockDim.x * blockDim.y * blockDim.z + N - 1) / N; }
  template <class T> T shfl(T v, int src, int line = __builtin_LINE()) const { return __shfl_sync(mask(), v, src, N, line); }
  template <class T> T shfl_down(T v, unsigned d, int line = __builtin_LINE()) const { return __shfl_down_sync(mask(), v, d, N, line); }
  template <class T> T shfl_up(T v, unsigned d, int line = __builtin_LINE()) const { return __shfl_up_sync(mask(), v, d, N, line); }
  template <class T> T shfl_xor(T v, int m, int line = __builtin_LINE()) const { return __shfl_xor_sync(mask(), v, m, N, line); }
  int any(int p, int line = __builtin_LINE()) const { return __any_sync(mask(), p, line); }
  int all(int p, int line = __builtin_LINE()) const { return __all_sync(mask(), p, line); }
  unsigned ballot(int p, int line = __builtin_LINE()) const {
    return __ballot_sync(mask(), p, line) >> (::klemu::g_cur->lane / N * N);
  }
};

template <unsigned N, class P>
static inline thread_block_tile<N, P> tiled_partition(const P&) { return thread_block_tile<N, P>(); }

template <class G> static inline void sync(const G& g) { g.sync(); }

template <class T = void> struct plus { T operator()(const T& a, const T& b) const { return a + b; } };
template <class T = void> struct less { T operator()(const T& a, const T& b) const { return a < b ? a : b; } };
template <class T = void> struct greater { T operator()(const T& a, const T& b) const { return a < b ? b : a; } };
template <class T = void> struct bit_and { T operator()(const T& a, const T& b) const { return a & b; } };
template <class T = void> struct bit_or { T operator()(const T& a, const T& b) const { return a | b; } };
template <class T = void> struct bit_xor { T operator()(const T& a, const T& b) const { return a ^ b; } };

// Butterfly over the tile: every lane ends with the reduction of all N values.
template <unsigned N, class P, class T, class Op>
static inline T reduce(const thread_block_tile<N, P>& g, T v, Op op) {
  for (unsigned o = N / 2; o > 0; o /= 2) v = op(v, g.shfl_xor(v, (int)o));
  return v;
}
template <unsigned N, class P, class T, class Op>
static inline T inclusive_scan(const thread_block_tile<N, P>& g, T v, Op op) {
  unsigned r = g.thread_rank();
  for (unsigned o = 1; o < N; o *= 2) {
    T u = g.shfl_up(v, o);
    if (r >= o) v = op(u, v);
  }
  return v;
}
template <unsigned N, class P, class T>
static inline T inclusive_scan(const thread_block_tile<N, P>& g, T v) { return inclusive_scan(g, v, plus<T>()); }
template <unsigned N, class P, class T, class Op>
static inline T exclusive_scan(const thread_block_tile<N, P>& g, T v, Op op) {
  T inc = inclusive_scan(g, v, op);
  T prev = g.shfl_up(inc, 1);
  return g.thread_rank() == 0 ? T() : prev;
}
template <unsigned N, class P, class T>
static inline T exclusive_scan(const thread_block_tile<N, P>& g, T v) { return exclusive_scan(g, v, plus<T>()); }

}  // namespace cooperative_groups
