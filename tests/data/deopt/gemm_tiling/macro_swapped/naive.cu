// C = A B, row-major, written with accessor macros: the row index walks threadIdx.x (the
// "uncoalesced" assignment), the guard wraps the work, the update is an fmaf, the bound of the
// reduction is a lower-case parameter and the leading dimensions are locals.
#include <cuda_runtime.h>

#define A_AT(i, j) a[(i) * lda + (j)]
#define B_AT(i, j) b[(i) * ldb + (j)]

__global__ void mm_macro(const float* a, const float* b, float* c, int m, int n, int k) {
    const int lda = k;
    const int ldb = n;
    const unsigned r = blockIdx.x * blockDim.x + threadIdx.x;
    const unsigned q = threadIdx.y + blockIdx.y * blockDim.y;
    if (r < m && q < n) {
        float s = 0.f;
        for (int p = 0; p < k; p++) {
            s = fmaf(A_AT(r, p), B_AT(p, q), s);
        }
        c[r * n + q] = s;
    }
}

extern "C" void launch(const float* a, const float* b, float* c, int m, int n, int k, cudaStream_t stream) {
    dim3 threads(16, 16);
    dim3 blocks((m + 15) / 16, (n + 15) / 16);
    mm_macro<<<blocks, threads, 0, stream>>>(a, b, c, m, n, k);
}
