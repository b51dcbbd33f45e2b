// y = alpha * x + w, fp32, one thread per element (guard-around-body idiom, threadIdx first).
// The launcher splits the vector in two halves, so the second launch gets pointers that are
// only 4-byte aligned whenever the first half's length is not a multiple of 4.
#include <cuda_runtime.h>

__global__ void affine(const float* __restrict__ x, const float* __restrict__ w, float* __restrict__ y,
                       float alpha, int count) {
    const int idx = threadIdx.x + blockIdx.x * blockDim.x;
    if (idx < count) {
        const float scaled = alpha * x[idx];
        y[idx] = scaled + w[idx];
    }
}

extern "C" void launch(const float* x, const float* w, float* y, int n, cudaStream_t stream) {
    const int head = n / 2;
    const int block = 128;
    if (head > 0) affine<<<(head + block - 1) / block, block, 0, stream>>>(x, w, y, 0.5f, head);
    affine<<<(n - head + block - 1) / block, block, 0, stream>>>(x + head, w + head, y + head, 0.5f, n - head);
}
