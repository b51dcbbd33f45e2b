// bf16 attention with a value width apart from the key width, written three-phase (size_t
// indices, direct scratch indexing in the weighted sum, __expf): fixture of flash_fusion's
// tensor-core forward step. M rows per head is odd, N keys not a multiple of the key tile, and
// the head sizes need not be multiples of 16 (the fused kernel pads them in shared memory).
#include <cuda_runtime.h>
#include <cuda_bf16.h>
#include <math.h>

__global__ void qk(const __nv_bfloat16* q, const __nv_bfloat16* k, float* s, int bh, int m, int n, int d, float alpha) {
    const size_t t = threadIdx.x + blockIdx.x * (size_t)blockDim.x;
    if (t >= (size_t)bh * m * n) return;
    const int col = t % n;
    const size_t r = t / n;
    const size_t head = r / m;
    float dot = 0.f;
    for (int x = 0; x < d; x++) dot += __bfloat162float(q[r * d + x]) * __bfloat162float(k[(head * n + col) * d + x]);
    s[t] = dot * alpha;
}

__global__ void rownorm(float* s, int rows, int n) {
    const size_t r = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
    if (r >= rows) return;
    float* row = s + r * n;
    float top = -INFINITY;
    for (int c = 0; c < n; ++c) top = fmaxf(top, row[c]);
    float z = 0.f;
    for (int c = 0; c < n; ++c) z += __expf(row[c] - top);
    for (int c = 0; c < n; ++c) row[c] = __expf(row[c] - top) / z;
}

__global__ void pv(const float* s, const __nv_bfloat16* v, __nv_bfloat16* o, int bh, int m, int n, int e) {
    const size_t t = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
    if (t >= (size_t)bh * m * e) return;
    const size_t r = t / e;
    const int c = t % e;
    const size_t head = r / m;
    float out = 0.0f;
    for (int j = 0; j < n; ++j) out += s[r * n + j] * __bfloat162float(v[(head * n + j) * e + c]);
    o[t] = __float2bfloat16_rn(out);
}

extern "C" void launch(const __nv_bfloat16* Q, const __nv_bfloat16* K, const __nv_bfloat16* V, __nv_bfloat16* O, float* S, int BH, int M,
                       int N, int D, int E, cudaStream_t st) {
    const float alpha = 1.0f / sqrtf((float)D);
    const int rows = BH * M;
    qk<<<(rows * N + 127) / 128, 128, 0, st>>>(Q, K, S, BH, M, N, D, alpha);
    rownorm<<<(rows + 127) / 128, 128, 0, st>>>(S, rows, N);
    pv<<<(rows * E + 127) / 128, 128, 0, st>>>(S, V, O, BH, M, N, E);
}
