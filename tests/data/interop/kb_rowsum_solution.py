import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

row_sum_source = """
#include <torch/extension.h>

__global__ void row_sum_kernel(const float* x, float* out, int rows, int cols) {
    int r = blockIdx.x;
    __shared__ float partial[256];
    float acc = 0.0f;
    for (int c = threadIdx.x; c < cols; c += blockDim.x) acc += x[r * cols + c];
    partial[threadIdx.x] = acc;
    __syncthreads();
    for (int s = blockDim.x / 2; s > 0; s >>= 1) {
        if (threadIdx.x < s) partial[threadIdx.x] += partial[threadIdx.x + s];
        __syncthreads();
    }
    if (threadIdx.x == 0) out[r] = partial[0];
}

torch::Tensor row_sum_cuda(torch::Tensor x) {
    int rows = x.size(0);
    int cols = x.size(1);
    auto out = torch::empty({rows}, x.options());
    row_sum_kernel<<<rows, 256>>>(x.data_ptr<float>(), out.data_ptr<float>(), rows, cols);
    return out;
}
"""

row_sum = load_inline(
    name="row_sum",
    cpp_sources="torch::Tensor row_sum_cuda(torch::Tensor x);",
    cuda_sources=row_sum_source,
    functions=["row_sum_cuda"],
)


class ModelNew(nn.Module):
    def __init__(self, dim: int):
        super().__init__()
        self.row_sum = row_sum

    def forward(self, x):
        return self.row_sum.row_sum_cuda(x)
