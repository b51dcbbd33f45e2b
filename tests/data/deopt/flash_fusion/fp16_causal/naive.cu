// fixture of flash_fusion's tensor-core forward step: causal fp16 attention per head through an
// fp32 scratch (scores, row softmax, weighted sum), any sequence length and head size.
#include <cuda_runtime.h>
#include <cuda_fp16.h>
#include <math.h>

__global__ void scores(const __half* Q, const __half* K, float* P, int BH, int S, int D, int causal, float scale) {
    long long idx = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    long long total = (long long)BH * S * S;
    if (idx >= total) return;
    int j = (int)(idx % S);
    int i = (int)((idx / S) % S);
    long long bh = idx / ((long long)S * S);
    const __half* q = Q + (bh * S + i) * D;
    const __half* k = K + (bh * S + j) * D;
    float acc = 0.0f;
    for (int d = 0; d < D; ++d) acc += __half2float(q[d]) * __half2float(k[d]);
    P[idx] = (causal && j > i) ? -INFINITY : acc * scale;
}

__global__ void rowsoftmax(float* P, int BH, int S) {
    long long row = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (row >= (long long)BH * S) return;
    float* p = P + row * S;
    float mx = -INFINITY;
    for (int j = 0; j < S; ++j) mx = fmaxf(mx, p[j]);
    float sum = 0.0f;
    for (int j = 0; j < S; ++j) sum += expf(p[j] - mx);
    for (int j = 0; j < S; ++j) p[j] = expf(p[j] - mx) / sum;
}

__global__ void weighted(const float* P, const __half* V, __half* O, int BH, int S, int D) {
    long long idx = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (idx >= (long long)BH * S * D) return;
    int d = (int)(idx % D);
    long long row = idx / D;
    long long bh = row / S;
    const float* p = P + row * S;
    float acc = 0.0f;
    for (int j = 0; j < S; ++j) acc += p[j] * __half2float(V[(bh * S + j) * D + d]);
    O[idx] = __float2half_rn(acc);
}

extern "C" void launch(const __half* Q, const __half* K, const __half* V, __half* O, float* P, int BH, int S,
                       int D, int causal, cudaStream_t stream) {
    const float scale = 1.0f / sqrtf((float)D);
    const int T = 256;
    long long n1 = (long long)BH * S * S, n2 = (long long)BH * S, n3 = (long long)BH * S * D;
    scores<<<(unsigned)((n1 + T - 1) / T), T, 0, stream>>>(Q, K, P, BH, S, D, causal, scale);
    rowsoftmax<<<(unsigned)((n2 + T - 1) / T), T, 0, stream>>>(P, BH, S);
    weighted<<<(unsigned)((n3 + T - 1) / T), T, 0, stream>>>(P, V, O, BH, S, D);
}
