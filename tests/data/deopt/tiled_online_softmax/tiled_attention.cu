#include <cuda_runtime.h>
#include <math.h>

// Attention forward, fp32 (B, H, S, D): a block per (batch, head), a thread per query row of a
// TILE-row query tile; key tiles outer. Each row's running max and sum live in run_max / run_sum
// and its output row is rescaled at every key tile. Written for the tiled_online_softmax tests.
constexpr int TILE = 32;

__global__ void tiled_attention(const float* q, const float* k, const float* v, float* run_max,
                                float* run_sum, float* out, int seq, int dim, float scale) {
    extern __shared__ float scratch[];
    const int head = blockIdx.x;
    const float* qh = q + (size_t)head * seq * dim;
    const float* kh = k + (size_t)head * seq * dim;
    const float* vh = v + (size_t)head * seq * dim;
    float* oh = out + (size_t)head * seq * dim;
    float* mh = run_max + (size_t)head * seq;
    float* sh = run_sum + (size_t)head * seq;
    float* row_scores = scratch + threadIdx.x * TILE;
    for (int t = 0; t < seq / TILE; ++t) {
        __syncthreads();
        for (int r = 0; r < seq / TILE; ++r) {
            const int row = r * TILE + threadIdx.x;
            float old_max = mh[r * TILE + threadIdx.x];
            float old_sum = sh[r * TILE + threadIdx.x];
            float tile_max = -INFINITY;
            for (int c = 0; c < TILE; ++c) {
                float dot = 0.0f;
                for (int e = 0; e < dim; ++e) dot += qh[row * dim + e] * kh[(t * TILE + c) * dim + e];
                row_scores[c] = dot * scale;
                tile_max = fmaxf(tile_max, dot * scale);
            }
            float tile_sum = 0.0f;
            for (int c = 0; c < TILE; ++c) {
                row_scores[c] = expf(row_scores[c] - tile_max);
                tile_sum += row_scores[c];
            }
            float new_max = fmaxf(old_max, tile_max);
            float new_sum = expf(old_max - new_max) * old_sum + expf(tile_max - new_max) * tile_sum;
            for (int e = 0; e < dim; ++e) {
                float acc = 0.0f;
                for (int c = 0; c < TILE; ++c) acc += row_scores[c] * vh[(t * TILE + c) * dim + e];
                oh[(r * TILE + threadIdx.x) * dim + e] =
                    (old_sum * expf(old_max - new_max) * oh[(r * TILE + threadIdx.x) * dim + e] +
                     expf(tile_max - new_max) * acc) / new_sum;
            }
            mh[r * TILE + threadIdx.x] = new_max;
            sh[r * TILE + threadIdx.x] = new_sum;
        }
        __syncthreads();
    }
}

__global__ void fill_value(float* a, float value, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) a[i] = value;
}

extern "C" void launch(const float* Q, const float* K, const float* V, float* O, float* M, float* L,
                       int B, int H, int S, int D, cudaStream_t stream) {
    const int rows = B * H * S;
    fill_value<<<(rows + 255) / 256, 256, 0, stream>>>(M, -INFINITY, rows);
    fill_value<<<(rows + 255) / 256, 256, 0, stream>>>(L, 0.0f, rows);
    fill_value<<<(rows * D + 255) / 256, 256, 0, stream>>>(O, 0.0f, rows * D);
    tiled_attention<<<B * H, TILE, TILE * TILE * sizeof(float), stream>>>(
        Q, K, V, M, L, O, S, D, 1.0f / sqrtf((float)D));
}
