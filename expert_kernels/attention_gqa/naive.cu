// attention_gqa, naive: grouped-query cross attention in three phases through the fp32 scratch
// P (B, H, Sq, Sk): scores (one thread per score), softmax (one thread per row), weighted sum
// (one thread per output element). Query head h reads key/value head h / (H / G).
#include <cuda_runtime.h>
#include <cuda_fp16.h>
#include <math.h>

__global__ void gqa_scores(const __half* Q, const __half* K, float* P, int B, int H, int G, int Sq, int Sk,
                           int D, float scale) {
    long long idx = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (idx >= (long long)B * H * Sq * Sk) return;
    int j = (int)(idx % Sk);
    long long row = idx / Sk;  // (b * H + h) * Sq + i
    long long bh = row / Sq;
    long long bg = (bh / H) * G + (bh % H) / (H / G);
    float acc = 0.0f;
    for (int d = 0; d < D; ++d) acc += __half2float(Q[row * D + d]) * __half2float(K[(bg * Sk + j) * D + d]);
    P[idx] = acc * scale;
}

__global__ void gqa_softmax(float* P, int rows, int Sk) {
    long long r = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (r >= rows) return;
    float* p = P + r * Sk;
    float mx = -INFINITY;
    for (int j = 0; j < Sk; ++j) mx = fmaxf(mx, p[j]);
    float sum = 0.0f;
    for (int j = 0; j < Sk; ++j) sum += expf(p[j] - mx);
    for (int j = 0; j < Sk; ++j) p[j] = expf(p[j] - mx) / sum;
}

__global__ void gqa_weighted_sum(const float* P, const __half* V, __half* O, int B, int H, int G, int Sq, int Sk,
                                 int D) {
    long long idx = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (idx >= (long long)B * H * Sq * D) return;
    int d = (int)(idx % D);
    long long row = idx / D;
    long long bh = row / Sq;
    long long bg = (bh / H) * G + (bh % H) / (H / G);
    const float* w = P + row * Sk;
    float acc = 0.0f;
    for (int j = 0; j < Sk; ++j) acc += w[j] * __half2float(V[(bg * Sk + j) * D + d]);
    O[idx] = __float2half_rn(acc);
}

extern "C" void launch(const __half* Q, const __half* K, const __half* V, __half* O, float* P, int B, int H,
                       int G, int Sq, int Sk, int D, cudaStream_t stream) {
    const float scale = 1.0f / sqrtf((float)D);
    const int T = 256;
    const int rows = B * H * Sq;
    long long n1 = (long long)rows * Sk, n3 = (long long)rows * D;
    gqa_scores<<<(unsigned)((n1 + T - 1) / T), T, 0, stream>>>(Q, K, P, B, H, G, Sq, Sk, D, scale);
    gqa_softmax<<<(unsigned)((rows + T - 1) / T), T, 0, stream>>>(P, rows, Sk);
    gqa_weighted_sum<<<(unsigned)((n3 + T - 1) / T), T, 0, stream>>>(P, V, O, B, H, G, Sq, Sk, D);
}
