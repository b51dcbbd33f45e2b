import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

# Custom CUDA kernel for a row softmax (one warp per row).
softmax_source = """
#include <torch/extension.h>
#include <cuda_runtime.h>

__device__ __forceinline__ float warp_max(float v) {
    for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffff, v, o));
    return v;
}

__global__ void softmax_rows(const float* __restrict__ x, float* __restrict__ y, int rows, int cols) {
    int row = blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32;
    int lane = threadIdx.x % 32;
    if (row >= rows) return;
    float m = -INFINITY;
    for (int c = lane; c < cols; c += 32) m = fmaxf(m, x[row * cols + c]);
    m = warp_max(m);
    float s = 0.f;
    for (int c = lane; c < cols; c += 32) s += __expf(x[row * cols + c] - m);
    for (int o = 16; o > 0; o >>= 1) s += __shfl_xor_sync(0xffffffff, s, o);
    for (int c = lane; c < cols; c += 32) y[row * cols + c] = __expf(x[row * cols + c] - m) / s;
    if (lane == 0 && row == 0) printf("rows=%d\\n", rows);
}

torch::Tensor softmax_cuda(torch::Tensor x) {
    auto y = torch::empty_like(x);
    const int rows = x.size(0), cols = x.size(1);
    const int warps = 8;
    softmax_rows<<<(rows + warps - 1) / warps, warps * 32>>>(x.data_ptr<float>(), y.data_ptr<float>(), rows, cols);
    return y;
}
"""

softmax_cpp_source = (
    "torch::Tensor softmax_cuda(torch::Tensor x);"
)

# Compile the inline CUDA code
softmax_ext = load_inline(
    name="softmax_ext",
    cpp_sources=softmax_cpp_source,
    cuda_sources=softmax_source,
    functions=["softmax_cuda"],
    verbose=False,
    extra_cflags=["-O3"],
    extra_cuda_cflags=["-O3", "--use_fast_math"],
)

relu_ext = torch.utils.cpp_extension.load_inline(
    "relu_ext",
    ["torch::Tensor relu_cuda(torch::Tensor x);"],
    [r'''
__global__ void relu_k(const float* x, float* y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = x[i] > 0.f ? x[i] : 0.f;
}
torch::Tensor relu_cuda(torch::Tensor x) {
    auto y = torch::empty_like(x);
    relu_k<<<(x.numel() + 255) / 256, 256>>>(x.data_ptr<float>(), y.data_ptr<float>(), x.numel());
    return y;
}
''', "// second translation unit\n" "__device__ int unused_counter;\n"],
    functions=["relu_cuda"],
)


class ModelNew(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.softmax = softmax_ext

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return relu_ext.relu_cuda(self.softmax.softmax_cuda(x))
