import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

src = """
#include <torch/extension.h>

__global__ void linear_bias_kernel(const float* x, const float* w, const float* b, float* y, int M, int N, int K) {
    int row = blockIdx.y * blockDim.y + threadIdx.y;
    int col = blockIdx.x * blockDim.x + threadIdx.x;
    if (row < M && col < N) {
        float acc = b[col];
        for (int k = 0; k < K; ++k) acc += x[row * K + k] * w[col * K + k];
        y[row * N + col] = acc;
    }
}

torch::Tensor linear_bias_cuda(torch::Tensor x, torch::Tensor w, torch::Tensor b) {
    int M = x.size(0), K = x.size(1), N = w.size(0);
    auto y = torch::empty({M, N}, x.options());
    dim3 block(16, 16);
    dim3 grid((N + 15) / 16, (M + 15) / 16);
    linear_bias_kernel<<<grid, block>>>(x.data_ptr<float>(), w.data_ptr<float>(), b.data_ptr<float>(), y.data_ptr<float>(), M, N, K);
    return y;
}
"""

ext = load_inline(name="linear_bias", cpp_sources="torch::Tensor linear_bias_cuda(torch::Tensor x, torch::Tensor w, torch::Tensor b);",
                  cuda_sources=src, functions=["linear_bias_cuda"])


class ModelNew(nn.Module):
    def __init__(self, in_features: int, out_features: int):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)
        self.ext = ext

    def forward(self, x):
        return self.ext.linear_bias_cuda(x, self.linear.weight, self.linear.bias)
