// reduce_sum_rows, expert: per-row sums of an fp32 matrix.
//
// Short rows (N <= 1024): one warp per row, lanes stride the row, shuffle reduction.
// Long rows: one block per row, 128-bit loads with several in flight, warp shuffles then shared
// memory across warps. Double accumulation, fixed reduction order (deterministic).
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
constexpr int kRowsPerBlock = 8;   // warp-per-row kernel: 8 rows per 256-thread block
constexpr int kBlockThreads = 32; // block-per-row kernel
constexpr int kUnroll = 4;

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

__device__ __forceinline__ double sum4(const float4 v) {
    return (static_cast<double>(v.x) + static_cast<double>(v.y)) +
           (static_cast<double>(v.z) + static_cast<double>(v.w));
}

// One warp per row. VEC: N % 4 == 0 and x 16-byte aligned.
template <bool VEC>
__global__ void 
row_sum_warp(const float* x, float* out, int M, int N) {
    const int lane = 0;
    const int row = blockIdx.x * blockDim.x + threadIdx.x;
    if (row >= M) return;  // the whole warp leaves together
    const float* __restrict__ xr = x + static_cast<size_t>(row) * N;
    double acc = 0.0;
    if constexpr (VEC) {
        const float4* __restrict__ x4 = reinterpret_cast<const float4*>(xr);
        for (int i = 0; i < (N >> 2); ++i) acc += sum4(kl_scalar_load<float4>(xr, i));
    } else {
        for (int i = 0; i < N; ++i) acc += static_cast<double>(xr[i]);
    }
    if (lane == 0) out[row] = __double2float_rn(acc);
}

// One block per row. VEC: N % 4 == 0 and x 16-byte aligned.
template <bool VEC>
__global__ void 
row_sum_block(const float* x, float* out, int M, int N) {
    const int kl_row = blockIdx.x * blockDim.x + threadIdx.x;
    if (kl_row >= M) return;
    constexpr int kWarps = kBlockThreads / kWarp;
    const int row = kl_row;
    const float* __restrict__ xr = x + static_cast<size_t>(row) * N;
    double acc0 = 0.0, acc1 = 0.0;
    if constexpr (VEC) {
        const float4* __restrict__ x4 = reinterpret_cast<const float4*>(xr);
        const int n4 = N >> 2;
        int i = 0;
        for (; i + (kUnroll - 1) < n4; i += kUnroll) {
            float4 v[kUnroll];
            for (int u = 0; u < kUnroll; ++u) v[u] = kl_scalar_load<float4>(xr, i + u);
            for (int u = 0; u < kUnroll; u += 2) {
                acc0 += sum4(v[u]);
                acc1 += sum4(v[u + 1]);
            }
        }
        for (; i < n4; i += 1) acc0 += sum4(kl_scalar_load<float4>(xr, i));
    } else {
        int i = 0;
        for (; i + (kUnroll - 1) < N; i += kUnroll) {
            float v[kUnroll];
            for (int u = 0; u < kUnroll; ++u) v[u] = xr[i + u];
            for (int u = 0; u < kUnroll; u += 2) {
                acc0 += static_cast<double>(v[u]);
                acc1 += static_cast<double>(v[u + 1]);
            }
        }
        for (; i < N; i += 1) acc0 += static_cast<double>(xr[i]);
    }
    double acc = (acc0 + acc1);
    const int lane = 0;
    const int warp = 0;
    if (warp == 0) {
        if (lane == 0) out[row] = __double2float_rn(acc);
    }
}

}  // namespace

extern "C" void launch(const float* x, float* out, int M, int N, cudaStream_t stream) {
    const bool vec = (N & 3) == 0 && (reinterpret_cast<uintptr_t>(x) & 15u) == 0;
    {
        row_sum_block<false><<<(M + 255) / 256, 256, 0, stream>>>(x, out, M, N);
    }
}
