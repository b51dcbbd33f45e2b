// log_softmax, expert: row-wise log-softmax over the last dimension, fp32 accumulation.
//
// Three size classes, the register-cached ones templated on compile-time items per thread:
//   N <= 1024          one warp per row, the row held in registers, butterfly shuffles;
//   1024 < N <= 8192   one block per row, the row held in registers (one read and one write of
//                      every element), warp shuffles then a shared slot per warp;
//   N > 8192           one block per row, a single online pass (running maximum with its
//                      rescaled sum of exponentials), then a pass that writes x - lse.
// 128-bit loads and stores when N is a multiple of 4 and both pointers are 16-byte aligned;
// scalar, bounds-checked accesses otherwise. __expf in the sums (its few-ulp error stays far
// inside fp32 tolerance after the log); logf once per row.
#include <cuda_runtime.h>
#include <math.h>
#include <stdint.h>

namespace {

constexpr unsigned kFullMask = 0xffffffffu;
constexpr int kWarp = 32;
constexpr int kRowsPerBlock = 4;    // warp-per-row kernel
constexpr int kBlockThreads = 256;  // block-per-row kernels
constexpr int kVec = 4;             // floats per 128-bit access

__device__ __forceinline__ void load4(const float* __restrict__ p, float* v) {
    const float4 t = __ldg(reinterpret_cast<const float4*>(p));
    v[0] = t.x;
    v[1] = t.y;
    v[2] = t.z;
    v[3] = t.w;
}
__device__ __forceinline__ void store4(float* __restrict__ p, const float* v) {
    *reinterpret_cast<float4*>(p) = make_float4(v[0], v[1], v[2], v[3]);
}

__device__ __forceinline__ float warp_max(float v) {
#pragma unroll
    for (int mask = kWarp / 2; mask > 0; mask >>= 1) v = fmaxf(v, __shfl_xor_sync(kFullMask, v, mask));
    return v;
}
__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
    for (int mask = kWarp / 2; mask > 0; mask >>= 1) v += __shfl_xor_sync(kFullMask, v, mask);
    return v;
}

// Block-wide maximum / sum; every thread gets the result. `slots` is one float per warp.
__device__ __forceinline__ float block_max(float v, float* slots) {
    v = warp_max(v);
    if (threadIdx.x % kWarp == 0) slots[threadIdx.x / kWarp] = v;
    __syncthreads();
    float r = slots[0];
#pragma unroll
    for (int w = 1; w < kBlockThreads / kWarp; ++w) r = fmaxf(r, slots[w]);
    return r;
}
__device__ __forceinline__ float block_sum(float v, float* slots) {
    v = warp_sum(v);
    if (threadIdx.x % kWarp == 0) slots[threadIdx.x / kWarp] = v;
    __syncthreads();
    float r = slots[0];
#pragma unroll
    for (int w = 1; w < kBlockThreads / kWarp; ++w) r += slots[w];
    return r;
}

// Merge two (running max, sum of exp(x - max)) states into (m, d).
__device__ __forceinline__ void merge_state(float& m, float& d, float m2, float d2) {
    const float mn = fmaxf(m, m2);
    if (mn == -INFINITY) return;  // both empty
    d = d * __expf(m - mn) + d2 * __expf(m2 - mn);
    m = mn;
}

// One warp per row; ITEMS elements per lane in registers (VEC: ITEMS / 4 packs).
template <int ITEMS, bool VEC>
__global__ void __launch_bounds__(kRowsPerBlock * kWarp)
log_softmax_warp(const float* __restrict__ x, float* __restrict__ y, int M, int N) {
    constexpr int W = VEC ? kVec : 1;
    static_assert(ITEMS % W == 0, "items per lane must be whole packs");
    const int lane = threadIdx.x % kWarp;
    const int row = blockIdx.x * kRowsPerBlock + threadIdx.x / kWarp;
    if (row >= M) return;  // the whole warp leaves together
    const float* __restrict__ xr = x + static_cast<size_t>(row) * N;
    float* __restrict__ yr = y + static_cast<size_t>(row) * N;

    float v[ITEMS];
#pragma unroll
    for (int c = 0; c < ITEMS / W; ++c) {
        const int col = (c * kWarp + lane) * W;
        if (col < N) {
            if constexpr (VEC) load4(xr + col, &v[c * W]);
            else v[c] = __ldg(xr + col);
        } else {
#pragma unroll
            for (int k = 0; k < W; ++k) v[c * W + k] = -INFINITY;
        }
    }
    float m = v[0];
#pragma unroll
    for (int i = 1; i < ITEMS; ++i) m = fmaxf(m, v[i]);
    m = warp_max(m);
    float s = 0.f;
#pragma unroll
    for (int i = 0; i < ITEMS; ++i) s += __expf(v[i] - m);  // padding: exp(-inf) = 0
    s = warp_sum(s);
    const float lse = m + logf(s);
#pragma unroll
    for (int c = 0; c < ITEMS / W; ++c) {
        const int col = (c * kWarp + lane) * W;
        if (col < N) {
#pragma unroll
            for (int k = 0; k < W; ++k) v[c * W + k] -= lse;
            if constexpr (VEC) store4(yr + col, &v[c * W]);
            else yr[col] = v[c];
        }
    }
}

// One block per row, the row held in registers.
template <int ITEMS, bool VEC>
__global__ void __launch_bounds__(kBlockThreads)
log_softmax_block(const float* __restrict__ x, float* __restrict__ y, int M, int N) {
    constexpr int W = VEC ? kVec : 1;
    static_assert(ITEMS % W == 0, "items per thread must be whole packs");
    __shared__ float slots_max[kBlockThreads / kWarp];
    __shared__ float slots_sum[kBlockThreads / kWarp];
    const int row = blockIdx.x;
    const float* __restrict__ xr = x + static_cast<size_t>(row) * N;
    float* __restrict__ yr = y + static_cast<size_t>(row) * N;

    float v[ITEMS];
#pragma unroll
    for (int c = 0; c < ITEMS / W; ++c) {
        const int col = (c * kBlockThreads + threadIdx.x) * W;
        if (col < N) {
            if constexpr (VEC) load4(xr + col, &v[c * W]);
            else v[c] = __ldg(xr + col);
        } else {
#pragma unroll
            for (int k = 0; k < W; ++k) v[c * W + k] = -INFINITY;
        }
    }
    float m = v[0];
#pragma unroll
    for (int i = 1; i < ITEMS; ++i) m = fmaxf(m, v[i]);
    m = block_max(m, slots_max);
    float s = 0.f;
#pragma unroll
    for (int i = 0; i < ITEMS; ++i) s += __expf(v[i] - m);
    s = block_sum(s, slots_sum);
    const float lse = m + logf(s);
#pragma unroll
    for (int c = 0; c < ITEMS / W; ++c) {
        const int col = (c * kBlockThreads + threadIdx.x) * W;
        if (col < N) {
#pragma unroll
            for (int k = 0; k < W; ++k) v[c * W + k] -= lse;
            if constexpr (VEC) store4(yr + col, &v[c * W]);
            else yr[col] = v[c];
        }
    }
}

// Long rows: one block per row, online (max, sum) in one read, then the write pass.
template <bool VEC>
__global__ void __launch_bounds__(kBlockThreads)
log_softmax_online(const float* __restrict__ x, float* __restrict__ y, int M, int N) {
    constexpr int W = VEC ? kVec : 1;
    constexpr int kWarps = kBlockThreads / kWarp;
    __shared__ float slot_m[kWarps];
    __shared__ float slot_d[kWarps];
    const int row = blockIdx.x;
    const float* __restrict__ xr = x + static_cast<size_t>(row) * N;
    float* __restrict__ yr = y + static_cast<size_t>(row) * N;

    float m = -INFINITY, d = 0.f;
    for (int col = threadIdx.x * W; col < N; col += kBlockThreads * W) {
        float v[W];
        if constexpr (VEC) load4(xr + col, v);
        else v[0] = __ldg(xr + col);
        float pm = v[0];
#pragma unroll
        for (int k = 1; k < W; ++k) pm = fmaxf(pm, v[k]);
        const float mn = fmaxf(m, pm);
        float ps = 0.f;
#pragma unroll
        for (int k = 0; k < W; ++k) ps += __expf(v[k] - mn);
        d = d * __expf(m - mn) + ps;  // the running sum rescaled to the new maximum
        m = mn;
    }
#pragma unroll
    for (int offset = kWarp / 2; offset > 0; offset >>= 1) {
        const float m2 = __shfl_down_sync(kFullMask, m, offset);
        const float d2 = __shfl_down_sync(kFullMask, d, offset);
        merge_state(m, d, m2, d2);
    }
    if (threadIdx.x % kWarp == 0) {
        slot_m[threadIdx.x / kWarp] = m;
        slot_d[threadIdx.x / kWarp] = d;
    }
    __syncthreads();
    m = slot_m[0];
    d = slot_d[0];
#pragma unroll
    for (int w = 1; w < kWarps; ++w) merge_state(m, d, slot_m[w], slot_d[w]);
    const float lse = m + logf(d);
    for (int col = threadIdx.x * W; col < N; col += kBlockThreads * W) {
        float v[W];
        if constexpr (VEC) load4(xr + col, v);
        else v[0] = __ldg(xr + col);
#pragma unroll
        for (int k = 0; k < W; ++k) v[k] -= lse;
        if constexpr (VEC) store4(yr + col, v);
        else yr[col] = v[0];
    }
}

template <int ITEMS, bool VEC>
void launch_warp(const float* x, float* y, int M, int N, cudaStream_t stream) {
    log_softmax_warp<ITEMS, VEC>
        <<<(M + kRowsPerBlock - 1) / kRowsPerBlock, kRowsPerBlock * kWarp, 0, stream>>>(x, y, M, N);
}

template <bool VEC>
void launch_rows(const float* x, float* y, int M, int N, cudaStream_t stream) {
    if (N <= 4 * kWarp) launch_warp<4, VEC>(x, y, M, N, stream);
    else if (N <= 8 * kWarp) launch_warp<8, VEC>(x, y, M, N, stream);
    else if (N <= 16 * kWarp) launch_warp<16, VEC>(x, y, M, N, stream);
    else if (N <= 32 * kWarp) launch_warp<32, VEC>(x, y, M, N, stream);
    else if (N <= 8 * kBlockThreads) log_softmax_block<8, VEC><<<M, kBlockThreads, 0, stream>>>(x, y, M, N);
    else if (N <= 16 * kBlockThreads) log_softmax_block<16, VEC><<<M, kBlockThreads, 0, stream>>>(x, y, M, N);
    else if (N <= 32 * kBlockThreads) log_softmax_block<32, VEC><<<M, kBlockThreads, 0, stream>>>(x, y, M, N);
    else log_softmax_online<VEC><<<M, kBlockThreads, 0, stream>>>(x, y, M, N);
}

bool aligned16(const void* p) { return (reinterpret_cast<uintptr_t>(p) & 15u) == 0; }

}  // namespace

extern "C" void launch(const float* x, float* y, int M, int N, cudaStream_t stream) {
    if (N % kVec == 0 && aligned16(x) && aligned16(y))
        launch_rows<true>(x, y, M, N, stream);
    else
        launch_rows<false>(x, y, M, N, stream);
}
