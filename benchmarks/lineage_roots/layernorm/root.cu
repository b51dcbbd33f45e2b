// layernorm, expert: LayerNorm forward over the last dimension, fp16 in/out, fp32 statistics.
//
// Size classes, each a template on compile-time items per thread:
//   N <= 1024          one warp per row, the row cached in registers;
//   1024 < N <= 8192   persistent blocks (grid = resident blocks, grid-stride over rows), the row
//                      cached in registers, weight and bias loaded once per block and kept in
//                      registers, the next row's 128-bit loads issued before this row's math
//                      (H200, 16384 x 4096: 75% of copy bandwidth. Re-reading weight and bias per
//                      row from L1 instead, at 48 registers and 5 blocks per SM, measured 67%);
//   N > 8192           one block per row, streaming Welford, then a normalize pass.
// Statistics: each thread's mean and M2 from its registers (two-pass, exact), merged across
// lanes, warps and the block with Chan's parallel Welford combination. 128-bit loads/stores of
// 8 halves (half2 pairs unpacked to fp32, repacked with __floats2half2_rn), scalar and
// bounds-checked when N is not a multiple of 8 or a pointer is misaligned.
#include <cuda_runtime.h>
#include <cuda_fp16.h>
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

using scalar_t = __half;   // this workload's element type
using scalar2_t = __half2;

namespace {

constexpr unsigned kFullMask = 0xffffffffu;
constexpr int kWarp = 32;
constexpr int kRowsPerBlock = 4;    // warp-per-row kernel
constexpr int kBlockThreads = 32;  // block kernels
constexpr int kPackWidth = 8;       // 8 x 16-bit = 128 bits

// ---- 128-bit packs ------------------------------------------------------------------------
__device__ __forceinline__ uint4 load_raw(const scalar_t* __restrict__ p) {
    return kl_scalar_load<uint4>(p);
}
__device__ __forceinline__ void unpack(const uint4& raw, float* v) {
    const scalar2_t* h = reinterpret_cast<const scalar2_t*>(&raw);
    for (int k = 0; k < kPackWidth / 2; ++k) {
        const float2 f = make_float2(__half2float(h[k].x), __half2float(h[k].y));
        v[2 * k] = f.x;
        v[2 * k + 1] = f.y;
    }
}
__device__ __forceinline__ void store_pack(scalar_t* __restrict__ p, const float* v) {
    uint4 raw;
    scalar2_t* h = reinterpret_cast<scalar2_t*>(&raw);
    for (int k = 0; k < kPackWidth / 2; ++k) h[k] = make_half2(__float2half_rn(v[2 * k]), __float2half_rn(v[2 * k + 1]));
    kl_scalar_store<uint4>(p, 0, raw);
}
__device__ __forceinline__ float load_one(const scalar_t* __restrict__ p) { return __half2float(*p); }
__device__ __forceinline__ void store_one(scalar_t* p, float v) { *p = __float2half_rn(v); }

// ---- statistics: count, mean, sum of squared deviations ------------------------------------
struct Stats {
    float n, mean, m2;
};

// Chan et al.: combine the statistics of two disjoint sets.
__device__ __forceinline__ Stats welford_combine(const Stats& a, const Stats& b) {
    const float n = a.n + b.n;
    if (n == 0.f) return a;
    const float wb = b.n / n;
    const float delta = b.mean - a.mean;
    Stats r;
    r.n = n;
    r.mean = fmaf(delta, wb, a.mean);
    r.m2 = a.m2 + b.m2 + delta * delta * a.n * wb;
    return r;
}

// Tree over the warp to lane 0, then broadcast: every lane gets the same bits.
__device__ __forceinline__ Stats warp_reduce_stats(Stats s) {
    {  // shared-memory tree over this warp's 32 lanes, one buffer per merged value
        __shared__ decltype(s.n) tree_s_n[32][32];
        __shared__ decltype(s.mean) tree_s_mean[32][32];
        __shared__ decltype(s.m2) tree_s_m2[32][32];
        const int tree_lane = threadIdx.x & 31, tree_warp = threadIdx.x >> 5;
        for (int offset = kWarp / 2; offset > 0; offset >>= 1) {
            tree_s_n[tree_warp][tree_lane] = s.n;
            tree_s_mean[tree_warp][tree_lane] = s.mean;
            tree_s_m2[tree_warp][tree_lane] = s.m2;
            __syncwarp();
            if (tree_lane < offset) {
                Stats o;
                o.n = tree_s_n[tree_warp][tree_lane + offset];
                o.mean = tree_s_mean[tree_warp][tree_lane + offset];
                o.m2 = tree_s_m2[tree_warp][tree_lane + offset];
                s = welford_combine(s, o);
            }
            __syncwarp();
        }
        tree_s_n[tree_warp][tree_lane] = s.n;
        tree_s_mean[tree_warp][tree_lane] = s.mean;
        tree_s_m2[tree_warp][tree_lane] = s.m2;
        __syncwarp();
        s.n = tree_s_n[tree_warp][0];
        s.mean = tree_s_mean[tree_warp][0];
        s.m2 = tree_s_m2[tree_warp][0];
        __syncwarp();
    }
    s.n = __shfl_sync(kFullMask, s.n, 0);
    s.mean = __shfl_sync(kFullMask, s.mean, 0);
    s.m2 = __shfl_sync(kFullMask, s.m2, 0);
    return s;
}

// Block-wide: warps through shared memory; ends with a barrier so `smem` can be reused.
template <int THREADS>
__device__ __forceinline__ Stats block_reduce_stats(Stats s, Stats* smem) {
    constexpr int kWarps = THREADS / kWarp;
    s = warp_reduce_stats(s);
    if ((threadIdx.x & (kWarp - 1)) == 0) smem[threadIdx.x / kWarp] = s;
    __syncthreads();
    Stats r = smem[0];
    for (int w = 1; w < kWarps; ++w) r = welford_combine(r, smem[w]);
    __syncthreads();
    return r;
}

// A thread's own statistics over its cached values (exact two-pass over registers).
template <int ITEMS>
__device__ __forceinline__ Stats thread_stats(const float* v, const bool* valid) {
    float n = 0.f, s = 0.f;
    for (int i = 0; i < ITEMS; ++i)
        if (valid[i]) { n += 1.f; s += v[i]; }
    Stats st;
    st.n = n;
    st.mean = n > 0.f ? s / n : 0.f;
    float m2 = 0.f;
    for (int i = 0; i < ITEMS; ++i)
        if (valid[i]) { const float d = v[i] - st.mean; m2 = fmaf(d, d, m2); }
    st.m2 = m2;
    return st;
}

// ---- kernels ------------------------------------------------------------------------------
// One warp per row (N <= 1024).
template <int ITEMS, bool VEC>
__global__ void 
layernorm_warp_per_row(const scalar_t* x, const scalar_t* weight,
                       const scalar_t* bias, scalar_t* y, int M, int N, float eps) {
    constexpr int W = VEC ? kPackWidth : 1;
    static_assert(ITEMS % W == 0, "items per lane must be whole packs");
    const int lane = threadIdx.x & (kWarp - 1);
    const int row = blockIdx.x * kRowsPerBlock + threadIdx.x / kWarp;
    if (row >= M) return;  // the whole warp leaves together
    const scalar_t* __restrict__ xr = x + static_cast<size_t>(row) * N;
    scalar_t* __restrict__ yr = y + static_cast<size_t>(row) * N;

    float v[ITEMS];
    bool valid[ITEMS];
    for (int c = 0; c < ITEMS / W; ++c) {
        const int col = (c * kWarp + lane) * W;
        const bool ok = col < N;
        for (int k = 0; k < W; ++k) valid[c * W + k] = ok;
        if (ok) {
            if constexpr (VEC) unpack(load_raw(xr + col), &v[c * W]);
            else v[c] = load_one(xr + col);
        }
    }
    const Stats st = warp_reduce_stats(thread_stats<ITEMS>(v, valid));
    for (int c = 0; c < ITEMS / W; ++c) {
        const int col = (c * kWarp + lane) * W;
        if (col < N) {
            if constexpr (VEC) {
                float g[W], b[W];
                unpack(load_raw(weight + col), g);
                unpack(load_raw(bias + col), b);
                for (int k = 0; k < W; ++k) v[c * W + k] = fmaf((v[c * W + k] - st.mean) / sqrtf(st.m2 / static_cast<float>(N) + eps), g[k], b[k]);
                store_pack(yr + col, &v[c * W]);
            } else {
                store_one(yr + col, fmaf((v[c] - st.mean) / sqrtf(st.m2 / static_cast<float>(N) + eps), load_one(weight + col), load_one(bias + col)));
            }
        }
    }
}

// Persistent blocks, one row at a time per block (1024 < N <= 8192).
template <int ITEMS, bool VEC>
__global__ void 
layernorm_block_persistent(const scalar_t* x, const scalar_t* weight,
                           const scalar_t* bias, scalar_t* y, int M, int N, float eps) {
    constexpr int W = VEC ? kPackWidth : 1;
    constexpr int PACKS = ITEMS / W;
    static_assert(ITEMS % W == 0, "items per thread must be whole packs");
    __shared__ Stats red[kBlockThreads / kWarp];

    // VEC: weight, bias and the next row stay in registers as raw 128-bit packs.
    uint4 w_raw[VEC ? PACKS : 1], b_raw[VEC ? PACKS : 1], x_next[VEC ? PACKS : 1];
    if constexpr (VEC) {
        for (int p = 0; p < PACKS; ++p) {
            const int col = (p * kBlockThreads + threadIdx.x) * W;
            if (col < N) {
                w_raw[p] = load_raw(weight + col);
                b_raw[p] = load_raw(bias + col);
                if (blockIdx.x < M) x_next[p] = load_raw(x + static_cast<size_t>(blockIdx.x) * N + col);
            }
        }
    }
    for (int row = blockIdx.x; row < M; row += gridDim.x) {
        const size_t base = static_cast<size_t>(row) * N;
        float v[ITEMS];
        bool valid[ITEMS];
        if constexpr (VEC) {
            const int next = row + gridDim.x;
            for (int p = 0; p < PACKS; ++p) {
                const int col = (p * kBlockThreads + threadIdx.x) * W;
                const bool ok = col < N;
                for (int k = 0; k < W; ++k) valid[p * W + k] = ok;
                if (ok) {
                    unpack(x_next[p], &v[p * W]);
                    if (next < M) x_next[p] = load_raw(x + static_cast<size_t>(next) * N + col);  // prefetch
                }
            }
        } else {
            for (int i = 0; i < ITEMS; ++i) {
                const int col = i * kBlockThreads + threadIdx.x;
                valid[i] = col < N;
                if (valid[i]) v[i] = load_one(x + base + col);
            }
        }
        const Stats st = block_reduce_stats<kBlockThreads>(thread_stats<ITEMS>(v, valid), red);
        if constexpr (VEC) {
            for (int p = 0; p < PACKS; ++p) {
                const int col = (p * kBlockThreads + threadIdx.x) * W;
                if (col < N) {
                    float g[W], b[W];
                    unpack(w_raw[p], g);
                    unpack(b_raw[p], b);
                    for (int k = 0; k < W; ++k) v[p * W + k] = fmaf((v[p * W + k] - st.mean) / sqrtf(st.m2 / static_cast<float>(N) + eps), g[k], b[k]);
                    store_pack(y + base + col, &v[p * W]);
                }
            }
        } else {
            for (int i = 0; i < ITEMS; ++i) {
                const int col = i * kBlockThreads + threadIdx.x;
                if (valid[i])
                    store_one(y + base + col, fmaf((v[i] - st.mean) / sqrtf(st.m2 / static_cast<float>(N) + eps), load_one(weight + col), load_one(bias + col)));
            }
        }
    }
}

// Long rows (N > 8192): streaming Welford per thread, then a normalize pass.
template <bool VEC>
__global__ void 
layernorm_welford_streaming(const scalar_t* x, const scalar_t* weight,
                            const scalar_t* bias, scalar_t* y, int M, int N, float eps) {
    const int kl_row = blockIdx.x * blockDim.x + threadIdx.x;
    if (kl_row >= M) return;
    constexpr int W = VEC ? kPackWidth : 1;
    const size_t base = static_cast<size_t>(kl_row) * N;
    Stats st = {0.f, 0.f, 0.f};
    // pass 1: count and mean
    for (int col = 0; col < N; col += W) {
        float v[W];
        if constexpr (VEC) unpack(load_raw(x + base + col), v);
        else v[0] = load_one(x + base + col);
        for (int k = 0; k < W; ++k) {  // Welford's online update
            st.n += 1.f;
            const float delta = v[k] - st.mean;
            st.mean += delta / st.n;
        }
    }
    // pass 2: squared deviations from the final mean
    for (int col = 0; col < N; col += W) {
        float v[W];
        if constexpr (VEC) unpack(load_raw(x + base + col), v);
        else v[0] = load_one(x + base + col);
        for (int k = 0; k < W; ++k) {  // Welford's online update
            const float delta = v[k] - st.mean;
            st.m2 = fmaf(delta, v[k] - st.mean, st.m2);
        }
    }
    for (int col = 0; col < N; col += W) {
        if constexpr (VEC) {
            float v[W], g[W], b[W];
            unpack(load_raw(x + base + col), v);
            unpack(load_raw(weight + col), g);
            unpack(load_raw(bias + col), b);
            for (int k = 0; k < W; ++k) v[k] = fmaf((v[k] - st.mean) / sqrtf(st.m2 / static_cast<float>(N) + eps), g[k], b[k]);
            store_pack(y + base + col, v);
        } else {
            store_one(y + base + col,
                      fmaf((load_one(x + base + col) - st.mean) / sqrtf(st.m2 / static_cast<float>(N) + eps), load_one(weight + col), load_one(bias + col)));
        }
    }
}

// ---- dispatch on compile-time sizes -------------------------------------------------------
template <typename Kernel>
int resident_blocks(Kernel kernel, int threads) {
    int dev = 0, sms = 0, per_sm = 0;
    if (cudaGetDevice(&dev) != cudaSuccess ||
        cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev) != cudaSuccess || sms <= 0)
        sms = 132;
    if (cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, threads, 0) != cudaSuccess || per_sm <= 0)
        per_sm = 1;
    return sms * per_sm;
}

template <bool VEC, int ITEMS>
void launch_warp_per_row(const scalar_t* x, const scalar_t* w, const scalar_t* b, scalar_t* y, int M, int N,
                         float eps, cudaStream_t stream) {
    const int blocks = (M + kRowsPerBlock - 1) / kRowsPerBlock;
    if constexpr (VEC && ITEMS % kPackWidth != 0) {
        launch_warp_per_row<VEC, ITEMS * 2>(x, w, b, y, M, N, eps, stream);
    } else if constexpr (ITEMS == 32) {
        layernorm_warp_per_row<ITEMS, VEC><<<blocks, kRowsPerBlock * kWarp, 0, stream>>>(x, w, b, y, M, N, eps);
    } else {
        launch_warp_per_row<VEC, ITEMS * 2>(x, w, b, y, M, N, eps, stream);
    }
}

template <bool VEC, int ITEMS>
void launch_block_persistent(const scalar_t* x, const scalar_t* w, const scalar_t* b, scalar_t* y, int M, int N,
                             float eps, cudaStream_t stream) {
    static const int cap = resident_blocks(layernorm_block_persistent<ITEMS, VEC>, kBlockThreads);
    const int blocks = M < cap ? M : cap;
    layernorm_block_persistent<ITEMS, VEC><<<blocks, kBlockThreads, 0, stream>>>(x, w, b, y, M, N, eps);
}

template <bool VEC>
void launch_rows(const scalar_t* x, const scalar_t* w, const scalar_t* b, scalar_t* y, int M, int N, float eps,
                 cudaStream_t stream) {
    layernorm_welford_streaming<VEC><<<(M + 255) / 256, 256, 0, stream>>>(x, w, b, y, M, N, eps);
}

bool aligned16(const void* p) { return (reinterpret_cast<uintptr_t>(p) & 15u) == 0; }

}  // namespace

extern "C" void launch(const scalar_t* x, const scalar_t* weight, const scalar_t* bias, scalar_t* y, int M, int N,
                       float eps, cudaStream_t stream) {
    launch_rows<false>(x, weight, bias, y, M, N, eps, stream);
}
