import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

# The statistics come from torch operators called in C++ (mean and var over the spatial axes,
# arithmetic with broadcasting, sqrt); only the normalization is the solution's own kernel.
inorm_source = """
#include <torch/extension.h>

__global__ void normalize_kernel(const float* x, const float* mean, const float* invstd, float* out,
                                 int planes, int plane_size) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= planes * plane_size) return;
    int p = i / plane_size;
    out[i] = (x[i] - mean[p]) * invstd[p];
}

torch::Tensor instance_norm_cuda(torch::Tensor x) {
    auto mean = x.mean({2, 3}, true);
    auto var = x.var({2, 3}, false, true);
    auto invstd = 1.0 / (var + 1e-5).sqrt();
    TORCH_CHECK(x.select(1, 0).numel() == x.size(0) * x.size(2) * x.size(3), "select");
    auto out = torch::empty_like(x, torch::device(x.device()).dtype(x.dtype()));
    int planes = x.size(0) * x.size(1);
    int plane_size = x.size(2) * x.size(3);
    int n = planes * plane_size;
    normalize_kernel<<<(n + 255) / 256, 256>>>(x.data_ptr<float>(), mean.data_ptr<float>(),
                                               invstd.data_ptr<float>(), out.data_ptr<float>(),
                                               planes, plane_size);
    return out;
}
"""

inorm = load_inline(
    name="inorm",
    cpp_sources="torch::Tensor instance_norm_cuda(torch::Tensor x);",
    cuda_sources=inorm_source,
    functions=["instance_norm_cuda"],
)


class ModelNew(nn.Module):
    def __init__(self, num_features: int):
        super().__init__()
        self.inorm = inorm

    def forward(self, x):
        return self.inorm.instance_norm_cuda(x)
