// Row softmax: one block per row, warp-shuffle reductions, templated on block size and dtype.
#include <cuda_runtime.h>
#include <cuda_fp16.h>
#include <cuda_bf16.h>
#include <float.h>

#define WARP_SIZE 32

template <typename T>
__device__ __forceinline__ float to_float(T v) { return static_cast<float>(v); }

template <>
__device__ __forceinline__ float to_float<__half>(__half v) { return __half2float(v); }

__device__ __forceinline__ float warp_max(float v) {
#pragma unroll
    for (int offset = WARP_SIZE / 2; offset > 0; offset >>= 1)
        v = fmaxf(v, __shfl_xor_sync(0xffffffff, v, offset));
    return v;
}

__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
    for (int offset = WARP_SIZE / 2; offset > 0; offset >>= 1)
        v += __shfl_down_sync(0xffffffff, v, offset);
    return v;
}

template <int BLOCK, typename T>
__global__ void __launch_bounds__(256, 2)
softmax_kernel(const T* __restrict__ x, T* __restrict__ y, int cols) {
    __shared__ float red[BLOCK / WARP_SIZE];
    const int row = blockIdx.x;
    const int lane = threadIdx.x % WARP_SIZE;
    const int warp = threadIdx.x / WARP_SIZE;
    const T* xr = x + (size_t)row * cols;

    float m = -FLT_MAX;
    #pragma unroll 4
    for (int c = threadIdx.x; c < cols; c += BLOCK) {
        m = fmaxf(m, to_float(xr[c]));
    }
    m = warp_max(m);
    if (lane == 0) red[warp] = m;
    __syncthreads();
    if (warp == 0) {
        m = lane < BLOCK / WARP_SIZE ? red[lane] : -FLT_MAX;
        m = warp_max(m);
        if (lane == 0) red[0] = m;
    }
    __syncthreads();
    m = red[0];

    float s = 0.f;
    for (int c = threadIdx.x; c < cols; c += BLOCK) {
        s += __expf(to_float(xr[c]) - m);
    }
    s = warp_sum(s);
    __syncthreads();
    if (lane == 0) red[warp] = s;
    __syncthreads();
    if (warp == 0) {
        s = lane < BLOCK / WARP_SIZE ? red[lane] : 0.f;
        s = __shfl_sync(0xffffffff, warp_sum(s), 0);
        if (lane == 0) red[0] = s;
    }
    __syncthreads();
    const float inv = 1.f / red[0];
    for (int c = threadIdx.x; c < cols; c += BLOCK) {
        y[(size_t)row * cols + c] = static_cast<T>(__expf(to_float(xr[c]) - m) * inv);
    }
}

extern "C" {

void softmax_f32(const float* x, float* y, int rows, int cols, cudaStream_t stream) {
    softmax_kernel<256, float><<<rows, 256, 0, stream>>>(x, y, cols);
}

void softmax_f16(const __half* x, __half* y, int rows, int cols, cudaStream_t stream) {
    softmax_kernel<128, __half><<<dim3(rows), dim3(128), 0, stream>>>(x, y, cols);
}

}  // extern "C"
