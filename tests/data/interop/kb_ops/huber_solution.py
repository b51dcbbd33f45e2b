import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

# Per-element losses in the solution's kernel, then torch operators in C++ reduce them: sum,
# a host read through cpu().item(), division by a number.
huber_source = """
#include <torch/extension.h>

__global__ void huber_kernel(const float* p, const float* t, float* loss, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    float d = fabsf(p[i] - t[i]);
    loss[i] = d < 1.0f ? 0.5f * d * d : d - 0.5f;
}

torch::Tensor huber_cuda(torch::Tensor predictions, torch::Tensor targets) {
    auto losses = torch::empty_like(predictions);
    int n = predictions.numel();
    huber_kernel<<<(n + 255) / 256, 256>>>(predictions.data_ptr<float>(), targets.data_ptr<float>(),
                                           losses.data_ptr<float>(), n);
    auto total = losses.sum();
    TORCH_CHECK(std::isfinite(total.cpu().item<float>()), "the loss is not finite");
    return total / n;
}
"""

huber = load_inline(
    name="huber",
    cpp_sources="torch::Tensor huber_cuda(torch::Tensor predictions, torch::Tensor targets);",
    cuda_sources=huber_source,
    functions=["huber_cuda"],
)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.huber = huber

    def forward(self, predictions, targets):
        return self.huber.huber_cuda(predictions, targets)
