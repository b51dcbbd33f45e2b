// topk, expert: per-row top-k (k <= 64) of fp32 rows, values and indices, sorted descending;
// ties broken by the smaller index first.
//
// One block per row. Each element becomes a unique 64-bit key: the float mapped to an unsigned
// integer that orders like the float (sign flip), then the bit-inverted column index, so equal
// values order by smaller index. An MSB-first radix select over 8-bit digits finds the k-th
// largest key: per digit, a shared-memory histogram (atomicAdd) of the keys that still match the
// selected prefix, then one warp scans the 256 bins from the top (shuffle prefix sum) to pick the
// digit. It stops as soon as the chosen bin holds exactly the elements still needed, usually
// after two or three digits. The k selected keys are gathered into shared memory and sorted by
// one warp with a bitonic network over registers and __shfl_xor_sync (64 keys, two per lane).
// Rows up to 16384 elements are cached in registers (template on items per thread; 128-bit
// loads when N % 4 == 0 and the row is aligned); longer rows are re-read from L2 each digit.
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
constexpr int kThreads = 32;
constexpr int kMaxK = 64;
constexpr int kBins = 256;

// Unsigned key with the order of the float: flip all bits of negatives, the sign bit of the rest.
__device__ __forceinline__ uint32_t float_to_ordered(float v) {
    const uint32_t u = __float_as_uint(v);
    return (u & 0x80000000u) ? ~u : (u | 0x80000000u);
}
__device__ __forceinline__ float ordered_to_float(uint32_t k) {
    return __uint_as_float((k & 0x80000000u) ? (k & 0x7fffffffu) : ~k);
}
// Unique key: value order, then smaller column first.
__device__ __forceinline__ unsigned long long make_key(uint32_t ordered, int col) {
    return (static_cast<unsigned long long>(ordered) << 32) | static_cast<uint32_t>(~col);
}

// Column of a thread's item j: VEC packs of 4 (coalesced float4 per thread), else strided scalars.
template <bool VEC>
__device__ __forceinline__ int item_col(int j) {
    if constexpr (VEC) return ((j >> 2) * kThreads + static_cast<int>(threadIdx.x)) * 4 + (j & 3);
    else return j * kThreads + static_cast<int>(threadIdx.x);
}

struct SelectState {
    unsigned long long prefix;  // selected digits so far
    unsigned long long mask;    // digits decided so far
    int remaining;              // how many of the k still lie inside the current prefix
    bool done;                  // every key >= prefix (on the decided digits) is in the top k
};

// After a histogram of digit `shift`: one warp scans the bins from the top and picks the bin that
// holds the remaining-th largest key. Shared results land in `pick` (bin, count above, bin count).
__device__ __forceinline__ void pick_bin(const int* hist, int remaining, int* pick) {
    const int lane = threadIdx.x & (kWarp - 1);
    constexpr int kPerLane = kBins / kWarp;  // lane l owns bins 255-8l ... 248-8l (descending)
    int c[kPerLane];
    int local = 0;
    for (int b = 0; b < kPerLane; ++b) {
        c[b] = hist[kBins - 1 - kPerLane * lane - b];
        local += c[b];
    }
    int incl = local;  // inclusive prefix sum over lanes
    for (int o = 1; o < kWarp; o <<= 1) {
        const int t = __shfl_up_sync(kFullMask, incl, o);
        if (lane >= o) incl += t;
    }
    const int excl = incl - local;
    if (excl < remaining && remaining <= incl) {
        int above = excl;
        bool found = false;
        for (int b = 0; b < kPerLane; ++b) {
            if (!found && remaining <= above + c[b]) {
                pick[0] = kBins - 1 - kPerLane * lane - b;
                pick[1] = above;
                pick[2] = c[b];
                found = true;
            }
            above += c[b];
        }
    }
}

__device__ __forceinline__ void advance(SelectState& s, const int* pick, int shift) {
    s.remaining -= pick[1];
    s.prefix |= static_cast<unsigned long long>(pick[0]) << shift;
    s.mask |= 0xffull << shift;
    s.done = pick[2] == s.remaining;
}

// Bitonic sort, descending, of 64 keys held two per lane (positions lane and lane + 32).
__device__ __forceinline__ void bitonic_sort_desc64(unsigned long long& a, unsigned long long& b) {
    const int lane = threadIdx.x & (kWarp - 1);
    for (int k = 2; k <= 2 * kWarp; k <<= 1) {
        for (int j = k >> 1; j > 0; j >>= 1) {
            if (j == kWarp) {  // partner of position lane is lane + 32: both in this lane
                const unsigned long long hi = a > b ? a : b;
                const unsigned long long lo = a > b ? b : a;
                a = hi;  // k == 64: the whole sequence sorts descending
                b = lo;
            } else {
                const bool lower = (lane & j) == 0;
                const unsigned long long pa = __shfl_xor_sync(kFullMask, a, j);
                const unsigned long long pb = __shfl_xor_sync(kFullMask, b, j);
                const bool desc_a = (lane & k) == 0;             // position lane
                const bool desc_b = ((lane + kWarp) & k) == 0;   // position lane + 32
                const bool max_a = lower == desc_a;
                const bool max_b = lower == desc_b;
                a = max_a ? (a > pa ? a : pa) : (a < pa ? a : pa);
                b = max_b ? (b > pb ? b : pb) : (b < pb ? b : pb);
            }
        }
    }
}

// Gathered keys -> sorted values and indices (warp 0).
__device__ __forceinline__ void sort_and_write(const unsigned long long* sel, int K, float* __restrict__ values,
                                               long long* __restrict__ indices, size_t out_base) {
    const int lane = threadIdx.x & (kWarp - 1);
    unsigned long long a = lane < K ? sel[lane] : 0ull;  // 0 sorts below every real key
    unsigned long long b = lane + kWarp < K ? sel[lane + kWarp] : 0ull;
    bitonic_sort_desc64(a, b);
    if (lane < K) {
        values[out_base + lane] = ordered_to_float(static_cast<uint32_t>(a >> 32));
        indices[out_base + lane] = static_cast<long long>(~static_cast<uint32_t>(a));
    }
    if (lane + kWarp < K) {
        values[out_base + lane + kWarp] = ordered_to_float(static_cast<uint32_t>(b >> 32));
        indices[out_base + lane + kWarp] = static_cast<long long>(~static_cast<uint32_t>(b));
    }
}

// Rows cached in registers: ITEMS elements per thread.
template <int ITEMS, bool VEC>
__global__ void 
topk_radix_select(const float* x, float* values, long long* indices,
                  int M, int N, int K) {
    __shared__ int hist[kBins];
    __shared__ int pick[3];
    __shared__ int sel_count;
    __shared__ unsigned long long sel[kMaxK];
    const float* __restrict__ xr = x + static_cast<size_t>(blockIdx.x) * N;

    uint32_t key[ITEMS];
    if constexpr (VEC) {
        for (int p = 0; p < ITEMS / 4; ++p) {
            const int col = item_col<VEC>(4 * p);
            if (col < N) {
                const float4 v = kl_scalar_load<float4>((xr + col));
                key[4 * p] = float_to_ordered(v.x);
                key[4 * p + 1] = float_to_ordered(v.y);
                key[4 * p + 2] = float_to_ordered(v.z);
                key[4 * p + 3] = float_to_ordered(v.w);
            }
        }
    } else {
        for (int j = 0; j < ITEMS; ++j) {
            const int col = item_col<VEC>(j);
            if (col < N) key[j] = float_to_ordered(xr[col]);
        }
    }

    SelectState s = {0ull, 0ull, K, false};
    for (int shift = 56; shift >= 0 && !s.done; shift -= 8) {
        for (int i = threadIdx.x; i < kBins; i += kThreads) hist[i] = 0;
        __syncthreads();
        for (int j = 0; j < ITEMS; ++j) {
            const int col = item_col<VEC>(j);
            if (col < N) {
                const unsigned long long k64 = make_key(key[j], col);
                if ((k64 & s.mask) == s.prefix) atomicAdd(&hist[(k64 >> shift) & 0xff], 1);
            }
        }
        __syncthreads();
        if (threadIdx.x < kWarp) pick_bin(hist, s.remaining, pick);
        __syncthreads();
        advance(s, pick, shift);
    }

    if (threadIdx.x == 0) sel_count = 0;
    __syncthreads();
    for (int j = 0; j < ITEMS; ++j) {
        const int col = item_col<VEC>(j);
        if (col < N) {
            const unsigned long long k64 = make_key(key[j], col);
            if ((k64 & s.mask) >= s.prefix) sel[atomicAdd(&sel_count, 1)] = k64;
        }
    }
    __syncthreads();
    if (threadIdx.x < kWarp) sort_and_write(sel, K, values, indices, static_cast<size_t>(blockIdx.x) * K);
}

// Rows longer than the register cache: every digit re-reads the row (from L2 after the first).
__global__ void 
topk_radix_select_streaming(const float* x, float* values, long long* indices,
                            int M, int N, int K) {
    __shared__ int hist[kBins];
    __shared__ int pick[3];
    __shared__ int sel_count;
    __shared__ unsigned long long sel[kMaxK];
    const float* __restrict__ xr = x + static_cast<size_t>(blockIdx.x) * N;

    SelectState s = {0ull, 0ull, K, false};
    for (int shift = 56; shift >= 0 && !s.done; shift -= 8) {
        for (int i = threadIdx.x; i < kBins; i += kThreads) hist[i] = 0;
        __syncthreads();
        for (int col = threadIdx.x; col < N; col += kThreads) {
            const unsigned long long k64 = make_key(float_to_ordered(xr[col]), col);
            if ((k64 & s.mask) == s.prefix) atomicAdd(&hist[(k64 >> shift) & 0xff], 1);
        }
        __syncthreads();
        if (threadIdx.x < kWarp) pick_bin(hist, s.remaining, pick);
        __syncthreads();
        advance(s, pick, shift);
    }

    if (threadIdx.x == 0) sel_count = 0;
    __syncthreads();
    for (int col = threadIdx.x; col < N; col += kThreads) {
        const unsigned long long k64 = make_key(float_to_ordered(xr[col]), col);
        if ((k64 & s.mask) >= s.prefix) sel[atomicAdd(&sel_count, 1)] = k64;
    }
    __syncthreads();
    if (threadIdx.x < kWarp) sort_and_write(sel, K, values, indices, static_cast<size_t>(blockIdx.x) * K);
}

template <bool VEC>
void launch_rows(const float* x, float* values, long long* indices, int M, int N, int K, cudaStream_t stream) {
    topk_radix_select_streaming<<<M, kThreads, 0, stream>>>(x, values, indices, M, N, K);
}

}  // namespace

// Preconditions (workload.py): 1 <= K <= 64, K <= N.
extern "C" void launch(const float* x, float* values, long long* indices, int M, int N, int K, cudaStream_t stream) {
    launch_rows<false>(x, values, indices, M, N, K, stream);
}
