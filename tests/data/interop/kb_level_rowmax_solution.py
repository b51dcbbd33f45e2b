import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

# The forms real KernelBench solutions take: AT_DISPATCH, <cassert>, view, an autograd.Function,
# argument expressions (x.cuda(), x.contiguous()), a scalar attribute (self.dim), several
# statements in forward.
row_max_source = """
#include <torch/extension.h>
#include <cassert>

template <typename scalar_t>
__global__ void row_max_kernel(const scalar_t* x, scalar_t* out, int rows, int cols) {
    int r = blockIdx.x * blockDim.x + threadIdx.x;
    if (r >= rows) return;
    scalar_t m = x[(long)r * cols];
    for (int c = 1; c < cols; ++c) m = x[(long)r * cols + c] > m ? x[(long)r * cols + c] : m;
    out[r] = m;
}

torch::Tensor row_max_cuda(torch::Tensor x, int dim) {
    assert(dim == 1);
    auto flat = x.contiguous().view({x.size(0), -1});
    int rows = flat.size(0);
    int cols = flat.size(1);
    auto out = torch::empty({rows}, x.options());
    AT_DISPATCH_FLOATING_TYPES(x.scalar_type(), "row_max_cuda", ([&] {
        row_max_kernel<scalar_t><<<(rows + 127) / 128, 128>>>(
            flat.data_ptr<scalar_t>(), out.data_ptr<scalar_t>(), rows, cols);
    }));
    return out;
}
"""

row_max = load_inline(
    name="row_max",
    cpp_sources="torch::Tensor row_max_cuda(torch::Tensor x, int dim);",
    cuda_sources=row_max_source,
    functions=["row_max_cuda"],
)


class RowMaxFunction(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, dim):
        out = row_max.row_max_cuda(x, dim)
        ctx.save_for_backward(x)
        return out


class ModelNew(nn.Module):
    def __init__(self, dim: int):
        super().__init__()
        self.dim = dim

    def forward(self, x):
        x = x.cuda()
        y = RowMaxFunction.apply(x.contiguous(), self.dim)
        return y
