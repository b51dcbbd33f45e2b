// tc_gemm: bf16 GEMM with mma.sync.m16n8k16, ldmatrix (.x4 for A, .x4.trans for B) and a 3-stage
// cp.async pipeline. Block tile 64 x 64, 4 warps of 32 x 32 (2 x 4 MMA tiles), K slices of 32.
#include <cuda_runtime.h>
#include <cuda_bf16.h>
#include <stdint.h>

constexpr int BM = 64, BN = 64, BK = 32, STAGES = 3;
constexpr int AS = BK + 8, BS = BN + 8;  // padded row strides (elements)

__device__ __forceinline__ uint32_t sa(const void* p) { return (uint32_t)__cvta_generic_to_shared(p); }

__global__ void tc_gemm(const __nv_bfloat16* A, const __nv_bfloat16* B, __nv_bfloat16* C, int M, int N, int K) {
    extern __shared__ __align__(16) unsigned char raw[];
    __nv_bfloat16* As = reinterpret_cast<__nv_bfloat16*>(raw);
    __nv_bfloat16* Bs = As + STAGES * BM * AS;
    const int tid = threadIdx.x, lane = tid % 32, warp = tid / 32;
    const int wm = warp / 2, wn = warp % 2;
    const int m0 = blockIdx.y * BM, n0 = blockIdx.x * BN;
    const int kt_n = K / BK;
    auto load = [&](int kt, int s) {
        for (int i = 0; i < 2; ++i) {
            int f = tid + i * 128;
            int r = f / 4, c = (f % 4) * 8;
            asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(sa(As + s * BM * AS + r * AS + c)),
                         "l"(A + (size_t)(m0 + r) * K + kt * BK + c));
            int rb = f / 8, cb = (f % 8) * 8;
            asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(sa(Bs + s * BK * BS + rb * BS + cb)),
                         "l"(B + (size_t)(kt * BK + rb) * N + n0 + cb));
        }
    };
    float acc[2][4][4] = {};
    for (int s = 0; s < STAGES - 1; ++s) {
        if (s < kt_n) load(s, s);
        asm volatile("cp.async.commit_group;\n" ::);
    }
    for (int kt = 0; kt < kt_n; ++kt) {
        asm volatile("cp.async.wait_group 1;\n" ::: "memory");
        __syncthreads();
        if (kt + STAGES - 1 < kt_n) load(kt + STAGES - 1, (kt + STAGES - 1) % STAGES);
        asm volatile("cp.async.commit_group;\n" ::);
        const int s = kt % STAGES;
        for (int ks = 0; ks < BK / 16; ++ks) {
            uint32_t af[2][4], bf[2][4];
            for (int mi = 0; mi < 2; ++mi) {
                const int row = wm * 32 + mi * 16 + lane % 16, col = ks * 16 + (lane / 16) * 8;
                asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                             : "=r"(af[mi][0]), "=r"(af[mi][1]), "=r"(af[mi][2]), "=r"(af[mi][3])
                             : "r"(sa(As + s * BM * AS + row * AS + col)));
            }
            for (int np = 0; np < 2; ++np) {
                const int row = ks * 16 + lane % 8 + ((lane / 8) % 2) * 8, col = wn * 32 + np * 16 + (lane / 16) * 8;
                asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                             : "=r"(bf[np][0]), "=r"(bf[np][1]), "=r"(bf[np][2]), "=r"(bf[np][3])
                             : "r"(sa(Bs + s * BK * BS + row * BS + col)));
            }
            for (int mi = 0; mi < 2; ++mi)
                for (int ni = 0; ni < 4; ++ni) {
                    float* d = acc[mi][ni];
                    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 "
                                 "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"
                                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                                 : "r"(af[mi][0]), "r"(af[mi][1]), "r"(af[mi][2]), "r"(af[mi][3]),
                                   "r"(bf[ni / 2][(ni % 2) * 2]), "r"(bf[ni / 2][(ni % 2) * 2 + 1]));
                }
        }
    }
    asm volatile("cp.async.wait_group 0;\n" ::: "memory");
    const int g = lane / 4, t = lane % 4;
    for (int mi = 0; mi < 2; ++mi)
        for (int ni = 0; ni < 4; ++ni) {
            const int r = m0 + wm * 32 + mi * 16 + g, c = n0 + wn * 32 + ni * 8 + 2 * t;
            *reinterpret_cast<__nv_bfloat162*>(C + (size_t)r * N + c) = __floats2bfloat162_rn(acc[mi][ni][0], acc[mi][ni][1]);
            *reinterpret_cast<__nv_bfloat162*>(C + (size_t)(r + 8) * N + c) =
                __floats2bfloat162_rn(acc[mi][ni][2], acc[mi][ni][3]);
        }
}

extern "C" void launch(const __nv_bfloat16* A, const __nv_bfloat16* B, __nv_bfloat16* C, int M, int N, int K,
                       cudaStream_t stream) {
    const size_t smem = (size_t)STAGES * (BM * AS + BK * BS) * 2;
    tc_gemm<<<dim3(N / BN, M / BM), 128, smem, stream>>>(A, B, C, M, N, K);
}
