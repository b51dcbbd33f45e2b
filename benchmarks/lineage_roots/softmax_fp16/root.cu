// softmax_fp16, expert: row-wise softmax over the last dimension of fp16 rows, fp32 math.
//
// Size classes, each a template on compile-time items per thread:
//   N <= 1024          one warp per row, the row cached in registers, shuffle all-reductions;
//   1024 < N <= 8192   one block per row, the row cached in registers, warp shuffles + shared
//                      memory across warps; one read and one write of every element;
//   N > 8192           one block per row, single-pass online softmax (running max and rescaled
//                      sum), then a second pass that writes.
// 128-bit loads and stores when N is a multiple of the vector width and the pointers are
// aligned (8 halves: unpacked as half2 pairs, repacked with __floats2half2_rn); scalar,
// bounds-checked accesses otherwise. __expf (ex2.approx): its few-ulp fp32 error is far
// inside fp16 rounding.
#include <cuda_runtime.h>
#include <cuda_fp16.h>
#include <math.h>
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

using scalar_t = __half;  // this workload's element type

namespace {

constexpr unsigned kFullMask = 0xffffffffu;
constexpr int kWarp = 32;
constexpr int kRowsPerBlock = 4;    // warp-per-row kernel
constexpr int kBlockThreads = 32;  // block-per-row kernels

// ---- 128-bit packs of 8 halves, converted to and from fp32 as half2 pairs -------------------
template <typename T> struct Pack;
template <> struct Pack<__half> { static constexpr int kWidth = 8; };

__device__ __forceinline__ void load_pack(const __half* __restrict__ p, float* v) {
    const uint4 t = kl_scalar_load<uint4>(p);
    const __half2* h = reinterpret_cast<const __half2*>(&t);
    for (int k = 0; k < 4; ++k) {
        const float2 f = make_float2(__half2float(h[k].x), __half2float(h[k].y));
        v[2 * k] = f.x;
        v[2 * k + 1] = f.y;
    }
}
__device__ __forceinline__ void store_pack(__half* __restrict__ p, const float* v) {
    uint4 t;
    __half2* h = reinterpret_cast<__half2*>(&t);
    for (int k = 0; k < 4; ++k) h[k] = make_half2(__float2half_rn(v[2 * k]), __float2half_rn(v[2 * k + 1]));
    kl_scalar_store<uint4>(p, 0, t);
}
__device__ __forceinline__ float load_one(const __half* __restrict__ p) { return __half2float(*p); }
__device__ __forceinline__ void store_one(__half* p, float v) { *p = __float2half_rn(v); }

// ---- reductions ---------------------------------------------------------------------------
struct MaxOp {
    __device__ __forceinline__ float operator()(float a, float b) const { return fmaxf(a, b); }
};
struct SumOp {
    __device__ __forceinline__ float operator()(float a, float b) const { return a + b; }
};

// Butterfly all-reduce: every lane ends with the warp's result.
template <class Op>
__device__ __forceinline__ float warp_allreduce(float v, Op op) {
    {  // shared-memory tree over this warp's 32 lanes
        __shared__ float v_tree[32][32];
        const int v_lane = threadIdx.x & 31, v_warp = threadIdx.x >> 5;
        v_tree[v_warp][v_lane] = v;
        __syncwarp();
        for (int s = 16; s > 0; s >>= 1) {
            if (v_lane < s) v_tree[v_warp][v_lane] = op(v_tree[v_warp][v_lane], v_tree[v_warp][v_lane + s]);
            __syncwarp();
        }
        v = v_tree[v_warp][0];
        __syncwarp();
    }
    return v;
}

// All-reduce over the block; `smem` holds one slot per warp and is used once per call site.
template <int THREADS, class Op>
__device__ __forceinline__ float block_allreduce(float v, Op op, float* smem) {
    constexpr int kWarps = THREADS / kWarp;
    v = warp_allreduce(v, op);
    if ((threadIdx.x & (kWarp - 1)) == 0) smem[threadIdx.x / kWarp] = v;
    __syncthreads();
    float r = smem[0];
    for (int w = 1; w < kWarps; ++w) r = op(r, smem[w]);
    return r;
}

// Online softmax state (running max m, sum d of exp(x - m)) and its merge.
__device__ __forceinline__ void online_merge(float& m, float& d, float m2, float d2) {
    const float mn = fmaxf(m, m2);
    if (mn == -INFINITY) return;  // both empty
    d = d * expf(m - mn) + d2 * expf(m2 - mn);
    m = mn;
}

// ---- kernels ------------------------------------------------------------------------------
// One warp per row; ITEMS elements per lane in registers (VEC: ITEMS / W packs of W elements).
template <typename T, int ITEMS, bool VEC>
__global__ void 
softmax_warp_per_row(const T* x, T* y, int M, int N) {
    constexpr int W = VEC ? Pack<T>::kWidth : 1;
    static_assert(ITEMS % W == 0, "items per lane must be whole packs");
    const int lane = threadIdx.x & (kWarp - 1);
    const int row = blockIdx.x * kRowsPerBlock + threadIdx.x / kWarp;
    if (row >= M) return;  // the whole warp leaves together
    const T* __restrict__ xr = x + static_cast<size_t>(row) * N;
    T* __restrict__ yr = y + static_cast<size_t>(row) * N;

    float v[ITEMS];
    for (int c = 0; c < ITEMS / W; ++c) {
        const int col = (c * kWarp + lane) * W;
        if (col < N) {
            if constexpr (VEC) load_pack(xr + col, &v[c * W]);
            else v[c] = load_one(xr + col);
        } else {
            for (int k = 0; k < W; ++k) v[c * W + k] = -INFINITY;
        }
    }
    float m = v[0];
    for (int i = 1; i < ITEMS; ++i) m = fmaxf(m, v[i]);
    m = warp_allreduce(m, MaxOp());
    float s = 0.f;
    for (int i = 0; i < ITEMS; ++i) {
        v[i] = expf(v[i] - m);  // padding: exp(-inf) = 0
        s += v[i];
    }
    s = warp_allreduce(s, SumOp());
    for (int c = 0; c < ITEMS / W; ++c) {
        const int col = (c * kWarp + lane) * W;
        if (col < N) {
            for (int k = 0; k < W; ++k) v[c * W + k] /= s;
            if constexpr (VEC) store_pack(yr + col, &v[c * W]);
            else store_one(yr + col, v[c]);
        }
    }
}

// One block per row; the row cached in registers: one read and one write per element.
template <typename T, int ITEMS, bool VEC>
__global__ void 
softmax_block_per_row(const T* x, T* y, int M, int N) {
    constexpr int W = VEC ? Pack<T>::kWidth : 1;
    static_assert(ITEMS % W == 0, "items per thread must be whole packs");
    __shared__ float red_max[kBlockThreads / kWarp];
    __shared__ float red_sum[kBlockThreads / kWarp];
    const int row = blockIdx.x;
    const T* __restrict__ xr = x + static_cast<size_t>(row) * N;
    T* __restrict__ yr = y + static_cast<size_t>(row) * N;

    float v[ITEMS];
    for (int c = 0; c < ITEMS / W; ++c) {
        const int col = (c * kBlockThreads + threadIdx.x) * W;
        if (col < N) {
            if constexpr (VEC) load_pack(xr + col, &v[c * W]);
            else v[c] = load_one(xr + col);
        } else {
            for (int k = 0; k < W; ++k) v[c * W + k] = -INFINITY;
        }
    }
    float m = v[0];
    for (int i = 1; i < ITEMS; ++i) m = fmaxf(m, v[i]);
    m = block_allreduce<kBlockThreads>(m, MaxOp(), red_max);
    float s = 0.f;
    for (int i = 0; i < ITEMS; ++i) {
        v[i] = expf(v[i] - m);
        s += v[i];
    }
    s = block_allreduce<kBlockThreads>(s, SumOp(), red_sum);
    for (int c = 0; c < ITEMS / W; ++c) {
        const int col = (c * kBlockThreads + threadIdx.x) * W;
        if (col < N) {
            for (int k = 0; k < W; ++k) v[c * W + k] /= s;
            if constexpr (VEC) store_pack(yr + col, &v[c * W]);
            else store_one(yr + col, v[c]);
        }
    }
}

// Long rows: one block per row, online softmax (one read for max and sum), then the write pass.
template <typename T, bool VEC>
__global__ void 
softmax_online(const T* x, T* y, int M, int N) {
    const int kl_row = blockIdx.x * blockDim.x + threadIdx.x;
    if (kl_row >= M) return;
    constexpr int W = VEC ? Pack<T>::kWidth : 1;
    constexpr int kWarps = kBlockThreads / kWarp;
    const int row = kl_row;
    const T* __restrict__ xr = x + static_cast<size_t>(row) * N;
    T* __restrict__ yr = y + static_cast<size_t>(row) * N;

    float m = -INFINITY, d = 0.f;
    // pass 1: the max
    for (int col = 0; col < N; col += W) {
        float v[W];
        if constexpr (VEC) load_pack(xr + col, v);
        else v[0] = load_one(xr + col);
        float pm = v[0];
        for (int k = 1; k < W; ++k) pm = fmaxf(pm, v[k]);
        const float mn = fmaxf(m, pm);
        float ps = 0.f;
        for (int k = 0; k < W; ++k) ps += expf(v[k] - mn);
        m = mn;
    }
    // pass 2: the sum of exp(x - max)
    for (int col = 0; col < N; col += W) {
        float v[W];
        if constexpr (VEC) load_pack(xr + col, v);
        else v[0] = load_one(xr + col);
        float pm = v[0];
        for (int k = 1; k < W; ++k) pm = fmaxf(pm, v[k]);
        const float mn = m;
        float ps = 0.f;
        for (int k = 0; k < W; ++k) ps += expf(v[k] - mn);
        d = d + ps;  // rescale the running sum to the new max
    }
    {  // shared-memory tree over this warp's 32 lanes, one buffer per merged value
        const int tree_lane = 0, tree_warp = 0;
    }
    for (int col = 0; col < N; col += W) {
        float v[W];
        if constexpr (VEC) load_pack(xr + col, v);
        else v[0] = load_one(xr + col);
        for (int k = 0; k < W; ++k) v[k] = expf(v[k] - m) / d;
        if constexpr (VEC) store_pack(yr + col, v);
        else store_one(yr + col, v[0]);
    }
}

// ---- dispatch on compile-time sizes -------------------------------------------------------
template <typename T, bool VEC, int ITEMS>
void launch_warp_per_row(const T* x, T* y, int M, int N, cudaStream_t stream) {
    if constexpr (VEC && ITEMS % Pack<T>::kWidth != 0) {
        launch_warp_per_row<T, VEC, ITEMS * 2>(x, y, M, N, stream);
    } else if constexpr (ITEMS == 32) {
        softmax_warp_per_row<T, ITEMS, VEC>
            <<<(M + kRowsPerBlock - 1) / kRowsPerBlock, kRowsPerBlock * kWarp, 0, stream>>>(x, y, M, N);
    } else {
        launch_warp_per_row<T, VEC, ITEMS * 2>(x, y, M, N, stream);
    }
}

template <typename T, bool VEC>
void launch_rows(const T* x, T* y, int M, int N, cudaStream_t stream) {
    softmax_online<T, VEC><<<(M + 255) / 256, 256, 0, stream>>>(x, y, M, N);
}

bool aligned16(const void* p) { return (reinterpret_cast<uintptr_t>(p) & 15u) == 0; }

}  // namespace

extern "C" void launch(const scalar_t* x, scalar_t* y, int M, int N, cudaStream_t stream) {
    launch_rows<scalar_t, false>(x, y, M, N, stream);
}
