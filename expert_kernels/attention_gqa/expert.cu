// attention_gqa, expert: one flash-style pass (fp32 SIMT, plain C++). A block owns 32 query rows of
// one (batch, head) and walks the keys in tiles of 32: the query rows are staged once as float in
// shared memory, each key tile's K and V rows (of the group's key/value head) too; each score is a
// dot of two shared rows, a warp per row keeps the running max and sum (online softmax: the old
// weights are rescaled by exp(m_old - m_new)), and the 32 x D output accumulators live in shared
// memory, rescaled and updated per tile; the scratch P is never touched. The element accessors
// (lambdas of the flat score / output index) keep the index arithmetic in one place; a block whose
// rows would read different key rows (never at the workload's shapes: Sq is a multiple of 32)
// computes through them directly.
#include <cuda_runtime.h>
#include <cuda_fp16.h>
#include <math.h>

__global__ void __launch_bounds__(256) gqa_flash_fwd(const __half* __restrict__ Q, const __half* __restrict__ K, int B, int H, int G, int Sq, int Sk, int D, float scale, int rows, const __half* __restrict__ V, __half* __restrict__ O) {
    extern __shared__ float smem[];
    auto row_valid = [&](long long r) -> bool {
        return !((r >= rows));
    };
    auto q_elem = [&](long long idx, int d) -> float {
        if (idx >= (long long)B * H * Sq * Sk) return 0.0f;
        int j = (int)(idx % Sk);
        long long row = idx / Sk;
        long long bh = row / Sq;
        long long bg = (bh / H) * G + (bh % H) / (H / G);
        return __half2float(__ldg(&Q[row * D + d]));
    };
    auto k_elem = [&](long long idx, int d) -> float {
        if (idx >= (long long)B * H * Sq * Sk) return 0.0f;
        int j = (int)(idx % Sk);
        long long row = idx / Sk;
        long long bh = row / Sq;
        long long bg = (bh / H) * G + (bh % H) / (H / G);
        return __half2float(__ldg(&K[(bg * Sk + j) * D + d]));
    };
    auto q_addr = [&](long long idx) -> const void* {
        if (idx >= (long long)B * H * Sq * Sk) return nullptr;
        int j = (int)(idx % Sk);
        long long row = idx / Sk;
        long long bh = row / Sq;
        long long bg = (bh / H) * G + (bh % H) / (H / G);
        const int d = 0;
        return (const void*)&(Q[row * D + d]);
    };
    auto k_addr = [&](long long idx) -> const void* {
        if (idx >= (long long)B * H * Sq * Sk) return nullptr;
        int j = (int)(idx % Sk);
        long long row = idx / Sk;
        long long bh = row / Sq;
        long long bg = (bh / H) * G + (bh % H) / (H / G);
        const int d = 0;
        return (const void*)&(K[(bg * Sk + j) * D + d]);
    };
    auto score_of = [&](long long idx, float acc) -> float {
        if (idx >= (long long)B * H * Sq * Sk) return -INFINITY;
        int j = (int)(idx % Sk);
        long long row = idx / Sk;
        long long bh = row / Sq;
        long long bg = (bh / H) * G + (bh % H) / (H / G);
        return acc * scale;
    };
    auto score_direct = [&](long long idx) -> float {
        if (idx >= (long long)B * H * Sq * Sk) return -INFINITY;
        int j = (int)(idx % Sk);
        long long row = idx / Sk;
        long long bh = row / Sq;
        long long bg = (bh / H) * G + (bh % H) / (H / G);
        float acc = 0.0f;
        for (int d = 0; d < D; ++d) acc += __half2float(Q[row * D + d]) * __half2float(K[(bg * Sk + j) * D + d]);
        return acc * scale;
    };
    auto v_elem = [&](long long idx, int j) -> float {
        if (idx >= (long long)B * H * Sq * D) return 0.0f;
        int d = (int)(idx % D);
        long long row = idx / D;
        long long bh = row / Sq;
        long long bg = (bh / H) * G + (bh % H) / (H / G);
        return __half2float(__ldg(&V[(bg * Sk + j) * D + d]));
    };
    auto v_addr = [&](long long idx, int j) -> const void* {
        if (idx >= (long long)B * H * Sq * D) return nullptr;
        int d = (int)(idx % D);
        long long row = idx / D;
        long long bh = row / Sq;
        long long bg = (bh / H) * G + (bh % H) / (H / G);
        return (const void*)&(V[(bg * Sk + j) * D + d]);
    };
    auto store_out = [&](long long idx, float acc) -> void {
        if (idx >= (long long)B * H * Sq * D) return;
        int d = (int)(idx % D);
        long long row = idx / D;
        long long bh = row / Sq;
        long long bg = (bh / H) * G + (bh % H) / (H / G);
        O[idx] = __float2half_rn(acc);
    };
    const int dq = (int)(D);
    const int dv = (int)(D);
    const long long keys = (long long)(Sk);
    const long long r0 = (long long)blockIdx.x * 32;
    float* q_tile = smem;
    float* k_tile = q_tile + 32 * dq;
    float* v_tile = k_tile + 32 * (dq + 1);
    float* p_tile = v_tile + 32 * dv;
    float* o_acc = p_tile + 32 * 33;
    float* row_max = o_acc + 32 * dv;
    float* row_sum = row_max + 32;
    float* row_scale = row_sum + 32;
    const int tid = threadIdx.x, lane = tid % 32, warp = tid / 32;
    for (int e = tid; e < 32; e += 256) {
        row_max[e] = -INFINITY;
        row_sum[e] = 0.0f;
    }
    for (int e = tid; e < 32 * dv; e += 256) o_acc[e] = 0.0f;
    int q_staged = 1;
    if (tid < 32 && row_valid(r0 + tid))
        q_staged = q_addr((r0 + tid) * keys) == q_addr((r0 + tid) * keys + keys - 1);
    q_staged = __syncthreads_and(q_staged);
    if (q_staged)
        for (int e = tid; e < 32 * dq; e += 256) {
            const long long r = r0 + e / dq;
            q_tile[e] = row_valid(r) ? q_elem(r * keys, e % dq) : 0.0f;
        }
    for (long long j0 = 0; j0 < keys; j0 += 32) {
        const long long jl = min(j0 + 31, keys - 1);
        int live = 0, staged = 1;
        for (int e = tid; e < 1024; e += 256) {
            const long long r = r0 + e / 32, j = j0 + e % 32, x = r * keys + j;
            const bool on = j < keys && row_valid(r) &&
                               !(score_of(x, 0.0f) == -INFINITY && score_of(x, 1.0f) == -INFINITY);
            p_tile[(e / 32) * 33 + e % 32] = on ? 0.0f : -INFINITY;
            live |= on;
        }
        if (tid < 32 && row_valid(r0 + tid)) {
            const long long r = r0 + tid;
            staged = k_addr(r * keys + j0) == k_addr(r0 * keys + j0) &&
                     k_addr(r * keys + jl) == k_addr(r0 * keys + jl) &&
                     v_addr(r * dv, j0) == v_addr(r0 * dv, j0) &&
                     v_addr(r * dv + dv - 1, jl) == v_addr(r0 * dv + dv - 1, jl);
        }
        live = __syncthreads_or(live);
        staged = __syncthreads_and(staged);
        if (!live) continue;
        if (staged) {
            for (int e = tid; e < 32 * dq; e += 256) {
                const long long j = j0 + e / dq;
                k_tile[(e / dq) * (dq + 1) + e % dq] =
                    j < keys ? k_elem(r0 * keys + j, e % dq) : 0.0f;
            }
            for (int e = tid; e < 32 * dv; e += 256) {
                const long long j = j0 + e / dv;
                v_tile[e] = j < keys ? v_elem(r0 * dv + e % dv, j) : 0.0f;
            }
        }
        __syncthreads();
        for (int e = tid; e < 1024; e += 256) {
            const int rr = e / 32, jj = e % 32;
            float* s = &p_tile[rr * 33 + jj];
            if (*s == -INFINITY) continue;
            const long long x = (r0 + rr) * keys + j0 + jj;
            if (staged && q_staged) {
                float a = 0.0f;
#pragma unroll 8
                for (int d = 0; d < dq; ++d) a += q_tile[rr * dq + d] * k_tile[jj * (dq + 1) + d];
                *s = score_of(x, a);
            } else {
                *s = score_direct(x);
            }
        }
        __syncthreads();
        for (int rr = warp; rr < 32; rr += 8) {
            const float s = p_tile[rr * 33 + lane];
            float mt = s;
            for (int o = 16; o > 0; o >>= 1) mt = fmaxf(mt, __shfl_xor_sync(0xffffffffu, mt, o));
            const float mo = row_max[rr], mn = fmaxf(mo, mt);
            const float p = s == -INFINITY ? 0.0f : __expf(s - mn);
            float sum = p;
            for (int o = 16; o > 0; o >>= 1) sum += __shfl_xor_sync(0xffffffffu, sum, o);
            p_tile[rr * 33 + lane] = p;
            __syncwarp();
            if (lane == 0) {
                const float a = mn == -INFINITY ? 1.0f : __expf(mo - mn);
                row_scale[rr] = a;
                row_sum[rr] = row_sum[rr] * a + sum;
                row_max[rr] = mn;
            }
        }
        __syncthreads();
        for (int e = tid; e < 32 * dv; e += 256) {
            const int rr = e / dv, c = e % dv;
            const float* w = &p_tile[rr * 33];
            float a = o_acc[e] * row_scale[rr];
            if (staged) {
#pragma unroll
                for (int jj = 0; jj < 32; ++jj) a += w[jj] * v_tile[jj * dv + c];
            } else {
                for (int jj = 0; jj < 32 && j0 + jj < keys; ++jj)
                    if (w[jj] != 0.0f) a += w[jj] * v_elem((r0 + rr) * dv + c, j0 + jj);
            }
            o_acc[e] = a;
        }
        __syncthreads();
    }
    for (int e = tid; e < 32 * dv; e += 256) {
        const long long r = r0 + e / dv;
        if (row_valid(r)) store_out(r * dv + e % dv, __fdividef(o_acc[e], row_sum[e / dv]));
    }
}




extern "C" void launch(const __half* Q, const __half* K, const __half* V, __half* O, float* P, int B, int H,
                       int G, int Sq, int Sk, int D, cudaStream_t stream) {
    const float scale = 1.0f / sqrtf((float)D);
    const int T = 256;
    const int rows = B * H * Sq;
    long long n1 = (long long)rows * Sk, n3 = (long long)rows * D;
    {
        const size_t smem_bytes = (size_t)(32 * D + 32 * (D + 1) + 32 * D + 32 * 33 + 32 * D + 96) * sizeof(float);
        cudaFuncSetAttribute(gqa_flash_fwd, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem_bytes);
        gqa_flash_fwd<<<(unsigned)((rows + 31) / 32), 256, smem_bytes, stream>>>(Q, K, B, H, G, Sq, Sk, D, scale, rows, V, O);
    }
}
