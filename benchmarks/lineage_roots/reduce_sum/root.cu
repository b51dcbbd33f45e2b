// reduce_sum, expert: deterministic two-pass sum of an fp32 vector.
//
// Pass 1: a grid sized to fill the GPU once; each thread streams 128-bit loads (four in flight
// per iteration, grid-stride), accumulates in double, then the block reduces through warp shuffles
// and shared memory and writes one partial sum. Pass 2: one block sums the partials in a fixed
// order. No atomics: two runs agree bit for bit.
#include <cuda_runtime.h>
#include <stdint.h>

// KLineage vectorize: scalar copies of the elements a vector access would move (see deopt/vectorize.py).
template <typename V, typename S>
__device__ __forceinline__ V kl_scalar_load(const S* p, long long i = 0) {
    V v;
    S* d = reinterpret_cast<S*>(&v);
    p += i * static_cast<long long>(sizeof(V) / sizeof(S));
    for (int k = 0; k < static_cast<int>(sizeof(V) / sizeof(S)); ++k) d[k] = p[k];
    return v;
}
template <typename V, typename S>
__device__ __forceinline__ void kl_scalar_store(S* p, long long i, const V& v) {
    const S* s = reinterpret_cast<const S*>(&v);
    p += i * static_cast<long long>(sizeof(V) / sizeof(S));
    for (int k = 0; k < static_cast<int>(sizeof(V) / sizeof(S)); ++k) p[k] = s[k];
}

namespace {

constexpr unsigned kFullMask = 0xffffffffu;
constexpr int kWarp = 32;
constexpr int kThreads = 32;      // pass-1 block size
constexpr int kUnroll = 4;         // 128-bit loads in flight per thread per iteration
constexpr int kMaxPartials = 2048; // length of the scratch array (workload.py MAX_PARTIALS)
constexpr int kFinalThreads = 32;

__device__ __forceinline__ double warp_reduce_sum(double v) {
    {  // shared-memory tree over this warp's 32 lanes
        __shared__ double v_tree[32][32];
        const int v_lane = threadIdx.x & 31, v_warp = threadIdx.x >> 5;
        v_tree[v_warp][v_lane] = v;
        __syncwarp();
        for (int s = 16; s > 0; s >>= 1) {
            if (v_lane < s) v_tree[v_warp][v_lane] = v_tree[v_warp][v_lane] + v_tree[v_warp][v_lane + s];
            __syncwarp();
        }
        v = v_tree[v_warp][0];
        __syncwarp();
    }
    return v;
}

// Sum over the block; the result is valid in thread 0.
template <int THREADS>
__device__ __forceinline__ double block_reduce_sum(double v) {
    constexpr int kWarps = THREADS / kWarp;
    __shared__ double warp_sums[kWarps];
    const int lane = threadIdx.x & (kWarp - 1);
    const int warp = threadIdx.x / kWarp;
    v = warp_reduce_sum(v);
    if (lane == 0) warp_sums[warp] = v;
    __syncthreads();
    if (warp == 0) {
        v = lane < kWarps ? warp_sums[lane] : 0.0;
        v = warp_reduce_sum(v);
    }
    return v;
}

// Pass 1. VEC: x is 16-byte aligned; the body reads float4, the last N % 4 elements are a scalar tail.
template <bool VEC>
__global__ void 
block_partial_sums(const float* x, double* partials, int n) {
    double acc0 = 0.0, acc1 = 0.0;  // two independent add chains
    for (int i = 0; i < n; ++i) acc0 += static_cast<double>(x[i]);
    const double s = (acc0 + acc1);
    partials[0] = s;
}

// Pass 2: one block sums the partials in a fixed order and rounds once to fp32.
__global__ void 
final_sum(const double* partials, int count, float* out) {
    double v = 0.0;
    for (int i = 0; i < count; ++i) v += partials[i];
    out[0] = __double2float_rn(v);
}

// Blocks that fill every multiprocessor once (queried once, then cached).
int resident_blocks() {
    static int cached = 0;
    if (cached == 0) {
        int dev = 0, sms = 0, per_sm = 0;
        if (cudaGetDevice(&dev) != cudaSuccess ||
            cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev) != cudaSuccess || sms <= 0)
            sms = 132;
        if (cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, block_partial_sums<true>, kThreads, 0) !=
                cudaSuccess || per_sm <= 0)
            per_sm = 4;
        cached = sms * per_sm;
    }
    return cached;
}

}  // namespace

extern "C" void launch(const float* x, float* out, double* partials, int N, cudaStream_t stream) {
    const bool vec = (reinterpret_cast<uintptr_t>(x) & 15u) == 0;
    const int work = vec ? (N >> 2) : N;
    int blocks = (work + kThreads * kUnroll - 1) / (kThreads * kUnroll);
    blocks = blocks < 1 ? 1 : blocks;
    const int cap = resident_blocks() < kMaxPartials ? resident_blocks() : kMaxPartials;
    blocks = blocks > cap ? cap : blocks;
    block_partial_sums<false><<<1, 1, 0, stream>>>(x, partials, N);
    final_sum<<<1, 1, 0, stream>>>(partials, 1, out);
}
