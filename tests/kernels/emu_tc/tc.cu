// Probes of the emu tensor-core / async-copy emulation (tests/test_emu_tc.py). Every kernel is one
// warp; fragments go in and out as raw per-lane registers so the Python side checks the PTX ISA
// layouts element by element.
#include <cuda_runtime.h>
#include <cuda_fp16.h>
#include <cuda_bf16.h>
#include <cuda_pipeline.h>
#include <mma.h>
#include <cuda/pipeline>
#include <stdint.h>

// ---- mma.sync: a[lane*4+i], b[lane*2+i], c[lane*4+i] are the lanes' registers; d likewise ----
__global__ void mma_k(const uint32_t* a, const uint32_t* b, const uint32_t* c, uint32_t* d, int kind) {
    const int l = threadIdx.x;
    uint32_t A0 = a[l * 4], A1 = a[l * 4 + 1], A2 = a[l * 4 + 2], A3 = a[l * 4 + 3];
    uint32_t B0 = b[l * 2], B1 = b[l * 2 + 1];
    float c0 = __uint_as_float(c[l * 4]), c1 = __uint_as_float(c[l * 4 + 1]);
    float c2 = __uint_as_float(c[l * 4 + 2]), c3 = __uint_as_float(c[l * 4 + 3]);
    float d0 = 0.f, d1 = 0.f, d2 = 0.f, d3 = 0.f;
    uint32_t h0 = c[l * 4], h1 = c[l * 4 + 1];
    if (kind == 0) {
        asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
                     "{%10,%11,%12,%13};\n"
                     : "=f"(d0), "=f"(d1), "=f"(d2), "=f"(d3)
                     : "r"(A0), "r"(A1), "r"(A2), "r"(A3), "r"(B0), "r"(B1), "f"(c0), "f"(c1), "f"(c2), "f"(c3));
    } else if (kind == 1) {
        d0 = c0; d1 = c1; d2 = c2; d3 = c3;
        asm volatile(
            "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 "
            "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"
            : "+f"(d0), "+f"(d1), "+f"(d2), "+f"(d3)
            : "r"(A0), "r"(A1), "r"(A2), "r"(A3), "r"(B0), "r"(B1));
    } else if (kind == 2) {
        asm volatile("mma.sync.aligned.m16n8k16.row.col.f16.f16.f16.f16 {%0,%1}, {%2,%3,%4,%5}, {%6,%7}, {%0,%1};\n"
                     : "+r"(h0), "+r"(h1)
                     : "r"(A0), "r"(A1), "r"(A2), "r"(A3), "r"(B0), "r"(B1));
        d0 = __uint_as_float(h0); d1 = __uint_as_float(h1);
    } else if (kind == 3) {
        asm volatile("mma.sync.aligned.m16n8k8.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5}, {%6}, "
                     "{%7,%8,%9,%10};\n"
                     : "=f"(d0), "=f"(d1), "=f"(d2), "=f"(d3)
                     : "r"(A0), "r"(A1), "r"(B0), "f"(c0), "f"(c1), "f"(c2), "f"(c3));
    } else {
        asm volatile("mma.sync.aligned.m16n8k8.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5}, {%6}, "
                     "{%7,%8,%9,%10};\n"
                     : "=f"(d0), "=f"(d1), "=f"(d2), "=f"(d3)
                     : "r"(A0), "r"(A1), "r"(B0), "f"(c0), "f"(c1), "f"(c2), "f"(c3));
    }
    d[l * 4] = __float_as_uint(d0);
    d[l * 4 + 1] = __float_as_uint(d1);
    d[l * 4 + 2] = __float_as_uint(d2);
    d[l * 4 + 3] = __float_as_uint(d3);
}

// Many back-to-back mma.sync (benchmark): d += a*b, `iters` times per warp.
__global__ void mma_loop_k(const uint32_t* a, float* out, int iters) {
    const int l = threadIdx.x % 32;
    uint32_t A0 = a[l * 4], A1 = a[l * 4 + 1], A2 = a[l * 4 + 2], A3 = a[l * 4 + 3];
    float d0 = 0.f, d1 = 0.f, d2 = 0.f, d3 = 0.f;
    for (int i = 0; i < iters; ++i)
        asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
                     "{%0,%1,%2,%3};\n"
                     : "+f"(d0), "+f"(d1), "+f"(d2), "+f"(d3)
                     : "r"(A0), "r"(A1), "r"(A2), "r"(A3), "r"(A0), "r"(A1));
    out[threadIdx.x] = d0 + d1 + d2 + d3;
}

// ---- ldmatrix: four 8x8 b16 matrices in static shared memory (rows padded to 24 elements) ----
__device__ __forceinline__ uint32_t saddr(const void* p) { return (uint32_t)__cvta_generic_to_shared(p); }

__global__ void ldm_k(const uint16_t* tile, uint32_t* out, int variant) {
    __shared__ __align__(16) uint16_t s[4][8][24];
    const int l = threadIdx.x;
    for (int i = l; i < 256; i += 32) s[i / 64][(i / 8) % 8][i % 8] = tile[i];
    __syncwarp();
    uint32_t r0 = 0, r1 = 0, r2 = 0, r3 = 0;
    const uint32_t a = saddr(&s[l / 8][l % 8][0]);
    switch (variant) {
        case 0: asm volatile("ldmatrix.sync.aligned.m8n8.x1.shared.b16 {%0}, [%1];\n" : "=r"(r0) : "r"(a)); break;
        case 1: asm volatile("ldmatrix.sync.aligned.m8n8.x2.shared.b16 {%0, %1}, [%2];\n" : "=r"(r0), "=r"(r1) : "r"(a)); break;
        case 2:
            asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                         : "=r"(r0), "=r"(r1), "=r"(r2), "=r"(r3) : "r"(a));
            break;
        case 3: asm volatile("ldmatrix.sync.aligned.m8n8.x1.trans.shared.b16 {%0}, [%1];\n" : "=r"(r0) : "r"(a)); break;
        case 4:
            asm volatile("ldmatrix.sync.aligned.m8n8.x2.trans.shared.b16 {%0, %1}, [%2];\n" : "=r"(r0), "=r"(r1) : "r"(a));
            break;
        default:
            asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared::cta.b16 {%0, %1, %2, %3}, [%4];\n"
                         : "=r"(r0), "=r"(r1), "=r"(r2), "=r"(r3) : "r"(a));
    }
    out[l * 4] = r0;
    out[l * 4 + 1] = r1;
    out[l * 4 + 2] = r2;
    out[l * 4 + 3] = r3;
}

// ---- cp.async: three groups of 16-byte copies (one chunk per lane per group) into dynamic shared
// memory; src_size bytes read, the rest zero. mode 0: wait_group 0 before reading everything.
// mode 1: wait_group 1 then read: groups 0 and 1 have landed, group 2 must not have. mode 2: read
// group 0 without any wait (the missing-wait bug). mode 3: 4- and 8-byte .ca copies + wait_all.
__global__ void cpa_k(const float* src, float* out, int src_size, int mode) {
    extern __shared__ __align__(16) float sm[];
    const int l = threadIdx.x;
    if (mode == 3) {
        uint32_t d4 = saddr(sm + l), d8 = saddr(sm + 32 + 2 * l);
        asm volatile("cp.async.ca.shared.global [%0], [%1], 4;\n" ::"r"(d4), "l"(src + l));
        asm volatile("cp.async.ca.shared.global [%0], [%1], 8, %2;\n" ::"r"(d8), "l"(src + 32 + 2 * l), "r"(src_size));
        asm volatile("cp.async.wait_all;\n" ::: "memory");
        __syncthreads();
        for (int i = l; i < 96; i += 32) out[i] = sm[i];
        return;
    }
    for (int g = 0; g < 3; ++g) {
        uint32_t dst = saddr(sm + g * 128 + 4 * l);
        asm volatile("cp.async.cg.shared.global.L2::128B [%0], [%1], 16, %2;\n" ::"r"(dst),
                     "l"(src + g * 128 + 4 * l), "r"(src_size));
        asm volatile("cp.async.commit_group;\n" ::);
    }
    if (mode == 0) asm volatile("cp.async.wait_group 0;\n" ::: "memory");
    if (mode == 1) asm volatile("cp.async.wait_group %0;\n" ::"n"(1) : "memory");
    __syncthreads();
    for (int i = l; i < 384; i += 32) out[i] = sm[i];
}

// ---- __pipeline_memcpy_async: 16-byte copies with zfill, then wait_prior(0) (or none) ----
__global__ void pipe_k(const float* src, float* out, int zfill, int wait) {
    __shared__ __align__(16) float sm[128];
    const int l = threadIdx.x;
    __pipeline_memcpy_async(sm + 4 * l, src + 4 * l, 16, zfill);
    __pipeline_commit();
    if (wait) __pipeline_wait_prior(0);
    __syncthreads();
    for (int i = l; i < 128; i += 32) out[i] = sm[i];
}

// ---- cuda::pipeline<thread_scope_thread>: two stages of 32 bytes per lane; stage 0 consumed after
// consumer_wait (lands), stage 1 read before its wait when `early` (poison), else after ----
__global__ void cupipe_k(const float* src, float* out, int early) {
    __shared__ __align__(16) float sm[2][256];
    const int l = threadIdx.x;
    cuda::pipeline<cuda::thread_scope_thread> pipe = cuda::make_pipeline();
    for (int s = 0; s < 2; ++s) {
        pipe.producer_acquire();
        cuda::memcpy_async(&sm[s][8 * l], src + s * 256 + 8 * l, cuda::aligned_size_t<16>(32), pipe);
        pipe.producer_commit();
    }
    pipe.consumer_wait();
    for (int i = 0; i < 8; ++i) out[8 * l + i] = sm[0][8 * l + i];
    pipe.consumer_release();
    if (!early) pipe.consumer_wait();
    for (int i = 0; i < 8; ++i) out[256 + 8 * l + i] = sm[1][8 * l + i];
    pipe.consumer_release();
}

// ---- WMMA ----
using namespace nvcuda;
template <int M, int N, int K, class TI, class TA, class LA, class LB>
__global__ void wmma_k(const TI* A, const TI* B, const TA* C, TA* D, float scale, int c_col, int d_col) {
    wmma::fragment<wmma::matrix_a, M, N, K, TI, LA> a;
    wmma::fragment<wmma::matrix_b, M, N, K, TI, LB> b;
    wmma::fragment<wmma::accumulator, M, N, K, TA> c;
    const bool acol = std::is_same<LA, wmma::col_major>::value, bcol = std::is_same<LB, wmma::col_major>::value;
    wmma::load_matrix_sync(a, A, acol ? M : K);
    wmma::load_matrix_sync(b, B, bcol ? K : N);
    wmma::load_matrix_sync(c, C, c_col ? M : N, c_col ? wmma::mem_col_major : wmma::mem_row_major);
    wmma::mma_sync(c, a, b, c);
    for (int i = 0; i < c.num_elements; ++i) c.x[i] = c.x[i] * TA(scale);  // element-wise epilogue
    wmma::store_matrix_sync(D, c, d_col ? M : N, d_col ? wmma::mem_col_major : wmma::mem_row_major);
}

// A WMMA GEMM as kernels write it: 4 warps per block, each a 16 x 16 tile of C, K walked in 16s,
// fill_fragment(0), alpha/beta epilogue through x[i]. A row-major M x K, B col-major (N x K rows).
__global__ void wmma_gemm_k(const half* A, const half* B, float* C, int M, int N, int K, float alpha, float beta) {
    const int warp = threadIdx.x / 32;
    const int tm = blockIdx.y * 2 + warp / 2, tn = blockIdx.x * 2 + warp % 2;
    wmma::fragment<wmma::matrix_a, 16, 16, 16, half, wmma::row_major> a;
    wmma::fragment<wmma::matrix_b, 16, 16, 16, half, wmma::col_major> b;
    wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc, c;
    wmma::fill_fragment(acc, 0.0f);
    for (int k = 0; k < K; k += 16) {
        wmma::load_matrix_sync(a, A + (size_t)tm * 16 * K + k, K);
        wmma::load_matrix_sync(b, B + (size_t)tn * 16 * K + k, K);
        wmma::mma_sync(acc, a, b, acc);
    }
    float* cp = C + (size_t)tm * 16 * N + tn * 16;
    wmma::load_matrix_sync(c, cp, N, wmma::mem_row_major);
    for (int i = 0; i < c.num_elements; ++i) c.x[i] = alpha * acc.x[i] + beta * c.x[i];
    wmma::store_matrix_sync(cp, c, N, wmma::mem_row_major);
}

extern "C" {
void wmma_gemm(const half* A, const half* B, float* C, int M, int N, int K, float alpha, float beta) {
    wmma_gemm_k<<<dim3(N / 32, M / 32), 128>>>(A, B, C, M, N, K, alpha, beta);
}
void mma(const uint32_t* a, const uint32_t* b, const uint32_t* c, uint32_t* d, int kind) {
    mma_k<<<1, 32>>>(a, b, c, d, kind);
}
void mma_loop(const uint32_t* a, float* out, int warps, int iters) { mma_loop_k<<<1, 32 * warps>>>(a, out, iters); }
void ldm(const uint16_t* tile, uint32_t* out, int variant) { ldm_k<<<1, 32>>>(tile, out, variant); }
void cpa(const float* src, float* out, int src_size, int mode) { cpa_k<<<1, 32, 384 * 4>>>(src, out, src_size, mode); }
void cupipe(const float* src, float* out, int early) { cupipe_k<<<1, 32>>>(src, out, early); }
void pipe(const float* src, float* out, int zfill, int wait) { pipe_k<<<1, 32>>>(src, out, zfill, wait); }
// variant: 0 bf16 m16n16k16 row/col, 1 half m16n16k16 col/row, 2 half m32n8k16, 3 bf16 m8n32k16,
// 4 half inputs with half accumulators m16n16k16
void wmma(const void* A, const void* B, const void* C, void* D, float scale, int c_col, int d_col, int variant) {
    using bf = __nv_bfloat16;
    switch (variant) {
        case 0: wmma_k<16, 16, 16, bf, float, wmma::row_major, wmma::col_major><<<1, 32>>>(
                    (const bf*)A, (const bf*)B, (const float*)C, (float*)D, scale, c_col, d_col); break;
        case 1: wmma_k<16, 16, 16, half, float, wmma::col_major, wmma::row_major><<<1, 32>>>(
                    (const half*)A, (const half*)B, (const float*)C, (float*)D, scale, c_col, d_col); break;
        case 2: wmma_k<32, 8, 16, half, float, wmma::row_major, wmma::row_major><<<1, 32>>>(
                    (const half*)A, (const half*)B, (const float*)C, (float*)D, scale, c_col, d_col); break;
        case 3: wmma_k<8, 32, 16, bf, float, wmma::row_major, wmma::col_major><<<1, 32>>>(
                    (const bf*)A, (const bf*)B, (const float*)C, (float*)D, scale, c_col, d_col); break;
        default: wmma_k<16, 16, 16, half, half, wmma::row_major, wmma::row_major><<<1, 32>>>(
                    (const half*)A, (const half*)B, (const half*)C, (half*)D, scale, c_col, d_col); break;
    }
    cudaDeviceSynchronize();
}
}
