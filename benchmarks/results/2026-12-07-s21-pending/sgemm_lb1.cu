// sgemm, expert: fp32 C = alpha * A @ B + beta * C, row-major, any M, N, K.
//
// Block tiling: each block computes a BM x BN tile of C, walking K in BK = 16 slices staged in
// shared memory, double-buffered (one __syncthreads per slice): the next slice's global loads
// are issued into registers before the current slice's math and stored to the other buffer
// after it. Warp tiling: the block's warps form a (BM / WM) x (BN / WN) grid of WM x WN warp
// tiles; inside a warp the lanes form an 8 x 4 grid of 4 x 4 sub-tiles, repeated
// (WM / 32) x (WN / 16) times, so each thread holds a TM x TN register block of accumulators
// (float acc[TM][TN], 8 x 8 for the large config) and reads TM + TN values per k (128-bit
// shared loads) for TM * TN FMAs. A is stored transposed (As[k][m]) so that the per-thread
// column of A is a contiguous float4; its rows are padded by 4 floats and the global-load
// mapping gives each warp 16 rows x 2 float4 columns, which makes the transposing scalar
// stores free of bank conflicts. B is stored as it is (Bs[k][n]), written with 128-bit stores.
// Global loads: 128-bit (float4) when K and N are multiples of 4 and the pointers are 16-byte
// aligned (template VEC), bounds-checked scalar loads otherwise; out-of-range elements are
// zeros, so M, N and K tails need no separate loop. Epilogue: alpha * acc + beta * C with
// 128-bit loads and stores of C on the VEC path. Templates on the tile sizes: 128 x 128 tiles
// (256 threads, 8 x 8 per thread) for large problems, 64 x 64 (128 threads, 4 x 8) when the
// large tiles would not fill the GPU.
#include <cuda_runtime.h>
#include <stdint.h>

namespace {

constexpr int kBK = 16;

template <int BM, int BN, int WM, int WN>
struct Tiles {
    static constexpr int kWarpsM = BM / WM;
    static constexpr int kWarpsN = BN / WN;
    static constexpr int kThreads = kWarpsM * kWarpsN * 32;
    static constexpr int kIterM = WM / 32;        // 8 lane rows x 4 rows each
    static constexpr int kIterN = WN / 16;        // 4 lane columns x 4 columns each
    static constexpr int kTM = kIterM * 4;
    static constexpr int kTN = kIterN * 4;
    static constexpr int kAStride = BM + 4;       // padded row of the transposed A tile
    static constexpr int kALoads = BM * kBK / 4 / kThreads;  // float4 per thread per slice
    static constexpr int kBLoads = kBK * BN / 4 / kThreads;
    static_assert(BM % WM == 0 && BN % WN == 0 && WM % 32 == 0 && WN % 16 == 0, "tile shape");
    static_assert(BM * kBK / 4 % kThreads == 0 && kBK * BN / 4 % kThreads == 0, "load split");
    static_assert(BM % 16 == 0, "A-load mapping covers 16 rows per pair of warps");
};

template <int BM, int BN, int WM, int WN, bool VEC>
__global__ void __launch_bounds__(Tiles<BM, BN, WM, WN>::kThreads, 1)
sgemm_tiled(const float* __restrict__ A, const float* __restrict__ B, float* __restrict__ C,
            float alpha, float beta, int M, int N, int K) {
    using T = Tiles<BM, BN, WM, WN>;
    constexpr int TM = T::kTM, TN = T::kTN, AS = T::kAStride;
    __shared__ __align__(16) float As[2][kBK][AS];
    __shared__ __align__(16) float Bs[2][kBK][BN];

    const int tid = threadIdx.x;
    const int warp = tid / 32, lane = tid % 32;
    const int wm = warp / T::kWarpsN, wn = warp % T::kWarpsN;
    const int lm = lane / 4, ln = lane % 4;
    const int m0 = blockIdx.y * BM, n0 = blockIdx.x * BN;

    // Global -> register staging for one K slice.
    float4 ra[T::kALoads], rb[T::kBLoads];

    // A: float4 f covers row (f / 64) * 16 + (f % 32) / 2, columns 4c..4c+3 of the slice with
    // c = ((f / 32) % 2) * 2 + f % 2; a warp gets 16 rows x 2 columns of float4.
    auto a_row = [](int f) { return (f / 64) * 16 + (f % 32) / 2; };
    auto a_col = [](int f) { return (((f / 32) % 2) * 2 + (f % 2)) * 4; };
    auto b_row = [](int f) { return f / (BN / 4); };
    auto b_col = [](int f) { return (f % (BN / 4)) * 4; };

    auto load_global = [&](int k0) {
#pragma unroll
        for (int i = 0; i < T::kALoads; ++i) {
            const int f = tid + i * T::kThreads;
            const int gm = m0 + a_row(f), gk = k0 + a_col(f);
            if (VEC) {
                ra[i] = (gm < M && gk < K) ? __ldg(reinterpret_cast<const float4*>(A + (size_t)gm * K + gk))
                                           : make_float4(0.f, 0.f, 0.f, 0.f);
            } else {
                const float* p = A + (size_t)gm * K + gk;
                const bool row_ok = gm < M;
                ra[i].x = (row_ok && gk + 0 < K) ? __ldg(p + 0) : 0.f;
                ra[i].y = (row_ok && gk + 1 < K) ? __ldg(p + 1) : 0.f;
                ra[i].z = (row_ok && gk + 2 < K) ? __ldg(p + 2) : 0.f;
                ra[i].w = (row_ok && gk + 3 < K) ? __ldg(p + 3) : 0.f;
            }
        }
#pragma unroll
        for (int i = 0; i < T::kBLoads; ++i) {
            const int f = tid + i * T::kThreads;
            const int gk = k0 + b_row(f), gn = n0 + b_col(f);
            if (VEC) {
                rb[i] = (gk < K && gn < N) ? __ldg(reinterpret_cast<const float4*>(B + (size_t)gk * N + gn))
                                           : make_float4(0.f, 0.f, 0.f, 0.f);
            } else {
                const float* p = B + (size_t)gk * N + gn;
                const bool row_ok = gk < K;
                rb[i].x = (row_ok && gn + 0 < N) ? __ldg(p + 0) : 0.f;
                rb[i].y = (row_ok && gn + 1 < N) ? __ldg(p + 1) : 0.f;
                rb[i].z = (row_ok && gn + 2 < N) ? __ldg(p + 2) : 0.f;
                rb[i].w = (row_ok && gn + 3 < N) ? __ldg(p + 3) : 0.f;
            }
        }
    };

    auto store_shared = [&](int buf) {
#pragma unroll
        for (int i = 0; i < T::kALoads; ++i) {
            const int f = tid + i * T::kThreads;
            const int r = a_row(f), c = a_col(f);
            As[buf][c + 0][r] = ra[i].x;
            As[buf][c + 1][r] = ra[i].y;
            As[buf][c + 2][r] = ra[i].z;
            As[buf][c + 3][r] = ra[i].w;
        }
#pragma unroll
        for (int i = 0; i < T::kBLoads; ++i) {
            const int f = tid + i * T::kThreads;
            *reinterpret_cast<float4*>(&Bs[buf][b_row(f)][b_col(f)]) = rb[i];
        }
    };

    float acc[TM][TN];
#pragma unroll
    for (int i = 0; i < TM; ++i)
#pragma unroll
        for (int j = 0; j < TN; ++j) acc[i][j] = 0.f;

    const int tiles = (K + kBK - 1) / kBK;
    load_global(0);
    store_shared(0);
    __syncthreads();

    for (int t = 0; t < tiles; ++t) {
        const int buf = t & 1;
        if (t + 1 < tiles) load_global((t + 1) * kBK);  // in flight during the math below

#pragma unroll
        for (int k = 0; k < kBK; ++k) {
            float a[TM], b[TN];
#pragma unroll
            for (int i = 0; i < T::kIterM; ++i) {
                const float4 v = *reinterpret_cast<const float4*>(&As[buf][k][wm * WM + i * 32 + lm * 4]);
                a[i * 4 + 0] = v.x; a[i * 4 + 1] = v.y; a[i * 4 + 2] = v.z; a[i * 4 + 3] = v.w;
            }
#pragma unroll
            for (int j = 0; j < T::kIterN; ++j) {
                const float4 v = *reinterpret_cast<const float4*>(&Bs[buf][k][wn * WN + j * 16 + ln * 4]);
                b[j * 4 + 0] = v.x; b[j * 4 + 1] = v.y; b[j * 4 + 2] = v.z; b[j * 4 + 3] = v.w;
            }
#pragma unroll
            for (int i = 0; i < TM; ++i)
#pragma unroll
                for (int j = 0; j < TN; ++j) acc[i][j] = fmaf(a[i], b[j], acc[i][j]);
        }

        if (t + 1 < tiles) store_shared(buf ^ 1);  // the other buffer: last read before the previous barrier
        __syncthreads();
    }

    // Epilogue: thread rows wm*WM + i*32 + lm*4 + r, columns wn*WN + j*16 + ln*4 + (0..3).
#pragma unroll
    for (int i = 0; i < T::kIterM; ++i) {
#pragma unroll
        for (int r = 0; r < 4; ++r) {
            const int gm = m0 + wm * WM + i * 32 + lm * 4 + r;
            if (gm >= M) continue;
#pragma unroll
            for (int j = 0; j < T::kIterN; ++j) {
                const int gn = n0 + wn * WN + j * 16 + ln * 4;
                const float* v = &acc[i * 4 + r][j * 4];
                float* p = C + (size_t)gm * N + gn;
                if (VEC) {
                    if (gn >= N) continue;
                    float4 o = make_float4(alpha * v[0], alpha * v[1], alpha * v[2], alpha * v[3]);
                    if (beta != 0.f) {
                        const float4 c = *reinterpret_cast<const float4*>(p);
                        o.x = fmaf(beta, c.x, o.x); o.y = fmaf(beta, c.y, o.y);
                        o.z = fmaf(beta, c.z, o.z); o.w = fmaf(beta, c.w, o.w);
                    }
                    *reinterpret_cast<float4*>(p) = o;
                } else {
#pragma unroll
                    for (int e = 0; e < 4; ++e)
                        if (gn + e < N) p[e] = beta == 0.f ? alpha * v[e] : fmaf(beta, p[e], alpha * v[e]);
                }
            }
        }
    }
}

template <int BM, int BN, int WM, int WN>
void launch_config(const float* A, const float* B, float* C, float alpha, float beta, int M, int N, int K,
                   bool vec, cudaStream_t stream) {
    using T = Tiles<BM, BN, WM, WN>;
    const dim3 grid((N + BN - 1) / BN, (M + BM - 1) / BM);
    if (vec)
        sgemm_tiled<BM, BN, WM, WN, true><<<grid, T::kThreads, 0, stream>>>(A, B, C, alpha, beta, M, N, K);
    else
        sgemm_tiled<BM, BN, WM, WN, false><<<grid, T::kThreads, 0, stream>>>(A, B, C, alpha, beta, M, N, K);
}

bool aligned16(const void* p) { return (reinterpret_cast<uintptr_t>(p) & 15u) == 0; }

}  // namespace

extern "C" void launch(const float* A, const float* B, float* C, float alpha, float beta, int M, int N, int K,
                       cudaStream_t stream) {
    const bool vec = K % 4 == 0 && N % 4 == 0 && aligned16(A) && aligned16(B) && aligned16(C);
    static int sms = 0;
    if (sms == 0) {
        int dev = 0;
        cudaGetDevice(&dev);
        cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev);
        if (sms <= 0) sms = 132;
    }
    const long long big_tiles = (long long)((M + 127) / 128) * ((N + 127) / 128);
    if (big_tiles >= 2LL * sms)
        launch_config<128, 128, 64, 32>(A, B, C, alpha, beta, M, N, K, vec, stream);
    else
        launch_config<64, 64, 32, 32>(A, B, C, alpha, beta, M, N, K, vec, stream);
}
