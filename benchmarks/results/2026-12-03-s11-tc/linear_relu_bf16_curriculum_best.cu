// linear_relu_bf16, naive: one thread per element of Y, fp32 accumulation over K through global memory.
#include <cuda_runtime.h>
#include <cuda_bf16.h>

// linear_relu_bf16_naive: block tile kLinear_relu_bf16_naive_BM x kLinear_relu_bf16_naive_BN, K tile kLinear_relu_bf16_naive_BK, register micro-tile kLinear_relu_bf16_naive_TM x kLinear_relu_bf16_naive_TN
constexpr int kLinear_relu_bf16_naive_BM = 128;
constexpr int kLinear_relu_bf16_naive_BN = 128;
constexpr int kLinear_relu_bf16_naive_BK = 16;
constexpr int kLinear_relu_bf16_naive_TM = 8;
constexpr int kLinear_relu_bf16_naive_TN = 8;

__global__ void linear_relu_bf16_naive(const __nv_bfloat16* __restrict__  X, const __nv_bfloat16* __restrict__  W, __nv_bfloat16* __restrict__  Y,
                                       int M, int N, int K) {
    __shared__ __align__(16) float kl_As[kLinear_relu_bf16_naive_BK][kLinear_relu_bf16_naive_BM + 4];
    __shared__ __align__(16) float kl_Bs[kLinear_relu_bf16_naive_BK][kLinear_relu_bf16_naive_BN];
    const int kl_tx = threadIdx.x, kl_ty = threadIdx.y, kl_tid = kl_ty * (kLinear_relu_bf16_naive_BN / kLinear_relu_bf16_naive_TN) + kl_tx;
    // a thread's micro-tile rows (columns) in groups of 4 adjacent ones when its size allows:
    // each group is read from shared memory as one 16-byte load
    constexpr int kl_vm = kLinear_relu_bf16_naive_TM % 4 == 0 ? 4 : 1, kl_vn = kLinear_relu_bf16_naive_TN % 4 == 0 ? 4 : 1;
    const int kl_row0 = blockIdx.y * kLinear_relu_bf16_naive_BM, kl_col0 = blockIdx.x * kLinear_relu_bf16_naive_BN;
    float kl_accum[kLinear_relu_bf16_naive_TM][kLinear_relu_bf16_naive_TN];
    #pragma unroll
    for (int kl_i = 0; kl_i < kLinear_relu_bf16_naive_TM; ++kl_i)
        #pragma unroll
        for (int kl_j = 0; kl_j < kLinear_relu_bf16_naive_TN; ++kl_j) kl_accum[kl_i][kl_j] = 0.0f;
    for (int kl_k0 = 0; kl_k0 < K; kl_k0 += kLinear_relu_bf16_naive_BK) {
        #pragma unroll
        for (int kl_e = kl_tid; kl_e < kLinear_relu_bf16_naive_BM * kLinear_relu_bf16_naive_BK; kl_e += (kLinear_relu_bf16_naive_BM / kLinear_relu_bf16_naive_TM) * (kLinear_relu_bf16_naive_BN / kLinear_relu_bf16_naive_TN)) {
            const int kl_r = kl_e / kLinear_relu_bf16_naive_BK, kl_c = kl_e % kLinear_relu_bf16_naive_BK;
            const int row = kl_row0 + kl_r;
            const int k = kl_k0 + kl_c;
            kl_As[kl_c][kl_r] = (!(row >= M) && (k < K)) ? static_cast<float>(__bfloat162float(__ldg(&X[(size_t)row * K + k]))) : static_cast<float>(0);
        }
        #pragma unroll
        for (int kl_e = kl_tid; kl_e < kLinear_relu_bf16_naive_BK * kLinear_relu_bf16_naive_BN; kl_e += (kLinear_relu_bf16_naive_BM / kLinear_relu_bf16_naive_TM) * (kLinear_relu_bf16_naive_BN / kLinear_relu_bf16_naive_TN)) {
            const int kl_r = kl_e % kLinear_relu_bf16_naive_BK, kl_c = kl_e / kLinear_relu_bf16_naive_BK;
            const int k = kl_k0 + kl_r;
            const int col = kl_col0 + kl_c;
            kl_Bs[kl_r][kl_c] = (!(col >= N) && (k < K)) ? static_cast<float>(__bfloat162float(__ldg(&W[(size_t)col * K + k]))) : static_cast<float>(0);
        }
        __syncthreads();
        #pragma unroll
        for (int kl_kk = 0; kl_kk < kLinear_relu_bf16_naive_BK; ++kl_kk) {
            float kl_a[kLinear_relu_bf16_naive_TM], kl_b[kLinear_relu_bf16_naive_TN];
            #pragma unroll
            for (int kl_i = 0; kl_i < kLinear_relu_bf16_naive_TM; ++kl_i) kl_a[kl_i] = kl_As[kl_kk][kl_ty * kl_vm + (kl_i / kl_vm) * (kLinear_relu_bf16_naive_BM / kLinear_relu_bf16_naive_TM * kl_vm) + kl_i % kl_vm];
            #pragma unroll
            for (int kl_j = 0; kl_j < kLinear_relu_bf16_naive_TN; ++kl_j) kl_b[kl_j] = kl_Bs[kl_kk][kl_tx * kl_vn + (kl_j / kl_vn) * (kLinear_relu_bf16_naive_BN / kLinear_relu_bf16_naive_TN * kl_vn) + kl_j % kl_vn];
            #pragma unroll
            for (int kl_i = 0; kl_i < kLinear_relu_bf16_naive_TM; ++kl_i)
                #pragma unroll
                for (int kl_j = 0; kl_j < kLinear_relu_bf16_naive_TN; ++kl_j) kl_accum[kl_i][kl_j] += kl_a[kl_i] * kl_b[kl_j];
        }
        __syncthreads();
    }
    #pragma unroll
    for (int kl_i = 0; kl_i < kLinear_relu_bf16_naive_TM; ++kl_i)
        #pragma unroll
        for (int kl_j = 0; kl_j < kLinear_relu_bf16_naive_TN; ++kl_j) {
            const int row = kl_row0 + kl_ty * kl_vm + (kl_i / kl_vm) * (kLinear_relu_bf16_naive_BM / kLinear_relu_bf16_naive_TM * kl_vm) + kl_i % kl_vm;
            const int col = kl_col0 + kl_tx * kl_vn + (kl_j / kl_vn) * (kLinear_relu_bf16_naive_BN / kLinear_relu_bf16_naive_TN * kl_vn) + kl_j % kl_vn;
            if (row >= M || col >= N) continue;
            float acc = kl_accum[kl_i][kl_j];
            Y[(size_t)row * N + col] = __float2bfloat16_rn(fmaxf(acc, 0.0f));
        }
}

extern "C" void launch(const __nv_bfloat16* X, const __nv_bfloat16* W, __nv_bfloat16* Y, int M, int N, int K,
                       cudaStream_t stream) {
    dim3 block(32, 8);
    dim3 grid((N + 31) / 32, (M + 7) / 8);
    linear_relu_bf16_naive<<<dim3((N + kLinear_relu_bf16_naive_BN - 1) / kLinear_relu_bf16_naive_BN, (M + kLinear_relu_bf16_naive_BM - 1) / kLinear_relu_bf16_naive_BM), dim3(kLinear_relu_bf16_naive_BN / kLinear_relu_bf16_naive_TN, kLinear_relu_bf16_naive_BM / kLinear_relu_bf16_naive_TM), 0, stream>>>(X, W, Y, M, N, K);
}
