// fp16 attention whose keys are stored transposed per head (BH, D, N: a key's elements are N apart)
// and whose values have a row width that is not a multiple of 8, written three-phase: fixture of
// flash_fusion's tensor-core staging. A key row is not a contiguous run, so the fused kernel must
// stage keys through the per-element lambdas; value rows are contiguous but not 16-byte aligned.
#include <cuda_runtime.h>
#include <cuda_fp16.h>
#include <math.h>

__global__ void scores(const __half* q, const __half* kt, float* s, int bh, int m, int n, int d, float alpha) {
    const long long t = threadIdx.x + blockIdx.x * (long long)blockDim.x;
    if (t >= (long long)bh * m * n) return;
    const int col = (int)(t % n);
    const long long r = t / n;
    const long long head = r / m;
    float dot = 0.f;
    for (int x = 0; x < d; x++) dot += __half2float(q[r * d + x]) * __half2float(kt[(head * d + x) * n + col]);
    s[t] = dot * alpha;
}

__global__ void rownorm(float* s, int rows, int n) {
    const long long r = blockIdx.x * (long long)blockDim.x + threadIdx.x;
    if (r >= rows) return;
    float* row = s + r * n;
    float top = -INFINITY;
    for (int c = 0; c < n; ++c) top = fmaxf(top, row[c]);
    float z = 0.f;
    for (int c = 0; c < n; ++c) z += expf(row[c] - top);
    for (int c = 0; c < n; ++c) row[c] = expf(row[c] - top) / z;
}

__global__ void weighted(const float* s, const __half* v, __half* o, int bh, int m, int n, int e) {
    const long long t = blockIdx.x * (long long)blockDim.x + threadIdx.x;
    if (t >= (long long)bh * m * e) return;
    const long long r = t / e;
    const int c = (int)(t % e);
    const long long head = r / m;
    float out = 0.0f;
    for (int j = 0; j < n; ++j) out += s[r * n + j] * __half2float(v[(head * n + j) * e + c]);
    o[t] = __float2half_rn(out);
}

extern "C" void launch(const __half* Q, const __half* KT, const __half* V, __half* O, float* S, int BH, int M,
                       int N, int D, int E, cudaStream_t st) {
    const float alpha = 1.0f / sqrtf((float)D);
    const int rows = BH * M;
    scores<<<(rows * N + 255) / 256, 256, 0, st>>>(Q, KT, S, BH, M, N, D, alpha);
    rownorm<<<(rows + 255) / 256, 256, 0, st>>>(S, rows, N);
    weighted<<<(rows * E + 255) / 256, 256, 0, st>>>(S, V, O, BH, M, N, E);
}
